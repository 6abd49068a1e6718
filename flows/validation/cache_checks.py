"""What ``flows validate`` says of a step's ``cache: {files}``: a declared file that is not there.

The files' contents are read into the step's key when a run is built
(:mod:`flows.expand.cache_keys`); a name that finds no file adds nothing to it, so an edit of the
file meant would not run the step again. A warning, not an error: a file a step of an earlier
run writes may be missing before the first one. Reads the file system; runs nothing.
"""

from __future__ import annotations

from pathlib import Path

from flows.flowfile.findings import FindingSink
from flows.flowfile.model import Flow
from flows.flowfile.templates import OPEN


def check_cache_files(flow: Flow, file: str, flow_dir: Path, sink: FindingSink) -> None:
    """A warning at each of ``flow``'s cache files (relative to ``flow_dir``) that is not a
    file."""
    for step_id, step in flow.steps.items():
        if step.cache is None:
            continue
        for index, name in enumerate(step.cache.files):
            if OPEN in name:  # a template is reported where templates are checked
                continue
            path = flow_dir / name
            if path.is_file():
                continue
            problem = "is not a file" if path.exists() else "not found"
            sink.warning(
                ("steps", step_id, "cache", "files", index),
                "cache-file",
                f"step '{step_id}': cache file '{name}' {problem} ({path.absolute()}): its "
                "contents are not part of the step's key, so a change to it does not run the "
                "step again",
                f"the path is relative to the folder of {Path(file).name}",
            )
