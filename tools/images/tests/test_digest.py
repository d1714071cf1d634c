"""Content keys change with content and ignore caches."""

from __future__ import annotations

from pathlib import Path

from kv_images.digest import ContentKey, tree_digest


def test_tree_digest_follows_content_not_caches(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    first = tree_digest(tmp_path)
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "mod.pyc").write_bytes(b"junk")
    assert tree_digest(tmp_path) == first
    (tmp_path / "pkg" / "mod.py").write_text("x = 2\n")
    assert tree_digest(tmp_path) != first


def test_content_key_is_order_and_label_sensitive() -> None:
    a = ContentKey("t").add("a", "1").add("b", "2").hexdigest()
    assert a != ContentKey("t").add("b", "2").add("a", "1").hexdigest()
    assert ContentKey("t").add("ab", "").hexdigest() != ContentKey("t").add("a", "b").hexdigest()
