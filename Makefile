# The two commands of the README. Both set up everything they need first.
.PHONY: setup demo test
setup:
	./tools/host-setup.sh

# The main job.
demo: setup
	./tools/demo.sh

# Every test tier that this machine can run.
test: setup
	uv run --frozen tox -e lint,type,unit,integration,e2e
