"""Files, directories, stdin, multi-document YAML and Lists; unreadable input is one line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Run

VMI = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
spec:
  domain:
    devices: {{}}
    memory:
      guest: 128Mi
"""


def test_our_examples_are_valid(run: Run, repo: Path) -> None:
    result = run("validate", "-f", str(repo / "examples"))
    assert (result.code, result.out) == (0, "")
    assert "3 object(s) checked, 0 with problems" in result.err


def test_stdin_with_several_documents(run: Run) -> None:
    text = "---\n" + VMI.format(name="a") + "---\n" + VMI.format(name="b") + "---\n"
    result = run("validate", "-f", "-", stdin=text)
    assert result.code == 0
    assert "2 object(s) checked" in result.err


def test_stdin_problem_names_stdin(run: Run) -> None:
    result = run("validate", "-f", "-", stdin=VMI.format(name="a").replace("128Mi", "lots"))
    assert result.code == 1
    [line] = result.lines
    assert line.startswith("<stdin>: VirtualMachineInstance/a: spec.domain.memory.guest: ")


def test_directory_files_in_name_order_and_recursion(run: Run, tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(VMI.format(name="b").replace("128Mi", "x"))
    (tmp_path / "a.yml").write_text(VMI.format(name="a").replace("128Mi", "y"))
    (tmp_path / "notes.txt").write_text("not a manifest")
    nested = tmp_path / "nested"
    nested.mkdir()
    (nested / "c.json").write_text(
        '{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",'
        ' "metadata": {"name": "c"}, "spec": {"domain": {"devices": {}, "memory": {"guest": "z"}}}}'
    )
    flat = run("validate", "-f", str(tmp_path))
    assert [line.split(":")[0] for line in flat.lines] == [
        str(tmp_path / "a.yml"),
        str(tmp_path / "b.yaml"),
    ]
    deep = run("validate", "-R", "-f", str(tmp_path))
    assert len(deep.lines) == 3
    assert deep.lines[2].startswith(f"{nested / 'c.json'}: VirtualMachineInstance/c: ")


def test_list_items_are_validated(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "list.yaml"
    file.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: kubevirt.io/v1, kind: VirtualMachine, metadata: {name: l1},"
        " spec: {runStrategy: Sometimes}}\n"
    )
    result = run("validate", "-f", str(file))
    assert result.code == 1
    assert result.lines[0].startswith(f"{file}[1].items[0]: VirtualMachine/l1: spec.runStrategy: ")


def test_other_api_groups_are_skipped(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "mixed.yaml"
    file.write_text(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 1\n"
        "---\n" + VMI.format(name="a")
    )
    result = run("validate", "-f", str(file))
    assert result.code == 0
    assert "1 object(s) checked, 0 with problems, 1 of other API groups skipped" in result.err


def test_invalid_yaml_is_one_clear_line(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "broken.yaml"
    file.write_text("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: [x\n")
    result = run("validate", "-f", str(file))
    assert result.code == 1
    [line] = result.lines
    assert line.startswith(f"{file}: invalid YAML at line ")


def test_an_integer_too_long_to_read_is_one_clear_line(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "huge.yaml"
    file.write_text(VMI.format(name="a").replace("128Mi", "1" * 5000))
    result = run("validate", "-f", str(file))
    assert result.code == 1
    [line] = result.lines
    assert line.startswith(f"{file}: invalid YAML: Exceeds the limit")
    assert "set_int_max_str_digits" not in line


def test_nesting_too_deep_to_read_is_one_clear_line(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "deep.yaml"
    file.write_text("a: " + "[" * 3000 + "]" * 3000 + "\n")
    result = run("validate", "-f", str(file))
    assert result.code == 1
    assert result.lines == [f"{file}: invalid YAML: nested deeper than can be read"]


def test_documents_before_a_yaml_error_are_still_checked(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "half.yaml"
    file.write_text(VMI.format(name="a").replace("128Mi", "bad") + "---\nkey: [unclosed\n")
    result = run("validate", "-f", str(file))
    assert result.code == 1
    assert len(result.lines) == 2
    assert result.lines[0].startswith(f"{file}: VirtualMachineInstance/a: spec.domain.memory.guest")
    assert result.lines[1].startswith(f"{file}: invalid YAML at line 12")


def test_missing_binary_and_empty_inputs(run: Run, tmp_path: Path) -> None:
    binary = tmp_path / "disk.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    result = run(
        "validate", "-f", str(tmp_path / "nope.yaml"), "-f", str(binary), "-f", str(empty_dir)
    )
    assert result.code == 1
    assert result.lines == [
        f"{tmp_path / 'nope.yaml'}: no such file or directory",
        f"{binary}: not UTF-8 text",
        f"{empty_dir}: no .yaml, .yml, .json files in directory",
    ]


def test_timestamps_stay_strings_as_in_kubectl(run: Run) -> None:
    text = VMI.format(name="a").replace(
        "  name: a\n", "  name: a\n  creationTimestamp: 2020-01-01T00:00:00Z\n"
    )
    result = run("validate", "-f", "-", stdin=text)
    assert (result.code, result.out) == (0, "")
