"""mkdocs hook (mkdocs.yml, ``hooks:``): the notebooks of ``notebooks/`` as pages of the site.

mkdocs reads pages only from ``docs_dir`` (``docs/``), and the notebooks live in
``notebooks/``, where the test suite runs them (nbmake); this hook adds each
``notebooks/*.ipynb`` to the build's files as ``notebooks/NAME.ipynb`` before
mkdocs-jupyter turns ``.ipynb`` files into pages (it executes them, from their own
directory, as nbmake does), and appends to the nav's "Notebooks" section any notebook
that mkdocs.yml does not list yet, so that a new notebook is never left out of the
site. It must never copy, write or change a file of the tree.
"""

from __future__ import annotations

import pathlib
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent
NAV_SECTION = "Notebooks"


def _notebooks() -> list[str]:
    return [f"notebooks/{p.name}" for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]


def on_config(config: Any) -> Any:
    for item in config["nav"] or []:
        if isinstance(item, dict) and isinstance(item.get(NAV_SECTION), list):
            section = item[NAV_SECTION]
            listed = {v if isinstance(v, str) else next(iter(v.values())) for v in section}
            section.extend(nb for nb in _notebooks() if nb not in listed)
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File  # mkdocs is there only when it builds

    for src_uri in _notebooks():
        files.append(File(src_uri, src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files


# mkdocs.plugins.event_priority(100), without importing mkdocs here: before the plugins'
# on_files, so that mkdocs-jupyter sees the notebooks.
on_files.mkdocs_priority = 100  # type: ignore[attr-defined]
