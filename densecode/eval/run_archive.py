"""A finished training run's results in one small file that outlives the machine it ran on.

A comparison sweep (arms x seeds) can take longer than the machine it runs on is kept, and the next machine starts
without the previous one's run folders. So a sweep archives each run as it finishes into a folder kept with the
project (`<archive dir>/<run name>.tar.xz`; xz packs a run's rollouts.jsonl, per-token arrays, to about a ninth),
and the next sweep restores what it finds there instead of training it again. An archive holds the run folder's top-level files, the ones the analyses read (config.yaml, sweep.json,
metrics.jsonl, eval_tasks.jsonl, rollouts.jsonl, ...), and not its checkpoints or TensorBoard events: a restored
run can be analysed, not resumed or re-scored.

Restoring writes those files back plus `archived.json` (the step the run finished at), which `run_state` in
densecode.eval.sweep counts as finished.

    python -m densecode.eval.run_archive pack RUN_DIR --to DIR --step 80    # archive a finished run by hand
    python -m densecode.eval.run_archive unpack DIR/NAME.tar.xz --to RUN_DIR
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import sys
import tarfile
from pathlib import Path

from densecode.errors import DensecodeError

MARKER = "archived.json"
# Analyses read these; a run's other top-level files (a stray core dump, a big export) stay out of the archive.
SUFFIXES = (".yaml", ".json", ".jsonl", ".md", ".csv", ".txt")
MAX_FILE_BYTES = 64 * 2**20


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":")


def archive_path(archive_dir: Path, name: str) -> Path:
    return Path(archive_dir) / f"{name}.tar.xz"


def archived_step(run_dir: Path) -> int | None:
    """The step a restored run finished at (None: the folder holds no restored archive)."""
    try:
        return int(json.loads((Path(run_dir) / MARKER).read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pack(run_dir: Path, archive_dir: Path, step: int) -> Path:
    """Write `<archive_dir>/<run folder name>.tar.xz` from the run's top-level result files; atomic (a killed pack
    leaves no half archive that a later sweep would take for a finished run)."""
    run_dir = Path(run_dir)
    files = sorted(p for p in run_dir.iterdir() if p.is_file() and p.suffix in SUFFIXES and p.name != MARKER)
    if not any(p.name == "metrics.jsonl" for p in files):
        raise DensecodeError(f"{run_dir} holds no metrics.jsonl: not a training run folder, nothing to archive")
    big = [p.name for p in files if p.stat().st_size > MAX_FILE_BYTES]
    if big:
        raise DensecodeError(f"{run_dir}: {', '.join(big)} over {MAX_FILE_BYTES >> 20} MiB; an archive is kept "
                             "with the project, so it takes result files only")
    dest = archive_path(archive_dir, run_dir.name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    with tarfile.open(tmp, "w:xz") as tar:
        for p in files:
            tar.add(p, arcname=p.name)
        marker = json.dumps({"step": int(step), "run": run_dir.name}).encode()
        info = tarfile.TarInfo(MARKER)
        info.size = len(marker)
        tar.addfile(info, io.BytesIO(marker))
    os.replace(tmp, dest)
    return dest


def replace_member(archive: Path, name: str, data: bytes) -> None:
    """Rewrite one member of an archive (e.g. a script's settings file when the command that reproduces the run
    now spells out a setting whose shipped default changed), the others kept byte for byte and in order; atomic."""
    archive = Path(archive)
    with tarfile.open(archive, "r:xz") as tar:
        members = [(info, tar.extractfile(info).read() if info.isfile() else None) for info in tar.getmembers()]
    if not any(info.name == name for info, _ in members):
        raise DensecodeError(f"{archive} has no member {name}")
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:xz") as out:
        for info, content in members:
            if info.name == name:
                content = data
                info.size = len(data)
            out.addfile(info, io.BytesIO(content) if content is not None else None)
    os.replace(tmp, archive)


def read_member(archive: Path, name: str) -> bytes | None:
    """One file of an archive (None when it has no such file)."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            try:
                member = tar.getmember(name)
            except KeyError:
                return None
            fh = tar.extractfile(member)
            return fh.read() if fh is not None else None
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
        raise DensecodeError(f"{archive} cannot be read ({_first_line(exc)}); delete it and rerun the run it "
                             "held") from exc


def unpack(archive: Path, run_dir: Path) -> int:
    """Restore an archive's files into run_dir (created); returns the step the run finished at."""
    archive, run_dir = Path(archive), Path(run_dir)
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            # Plain top-level files only: an archive from elsewhere must not write outside the run folder.
            bad = [m.name for m in members if not m.isfile() or "/" in m.name or m.name.startswith("..")]
            if bad:
                raise DensecodeError(f"{archive} holds entries that are not top-level files ({', '.join(bad[:3])}); "
                                     "it was not written by densecode.eval.run_archive: delete it")
            if MARKER not in {m.name for m in members}:
                raise DensecodeError(f"{archive} has no {MARKER}: not a finished run's archive; delete it")
            run_dir.mkdir(parents=True, exist_ok=True)
            for m in members:
                data = tar.extractfile(m).read()
                tmp = run_dir / (m.name + ".tmp")
                tmp.write_bytes(data)
                os.replace(tmp, run_dir / m.name)
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
        raise DensecodeError(f"{archive} cannot be read ({_first_line(exc)}); delete it and rerun the run it "
                             "held") from exc
    step = archived_step(run_dir)
    if step is None:
        raise DensecodeError(f"{archive}: {MARKER} names no step; delete it and rerun the run it held")
    return step


def restore(archive: Path, run_dir: Path) -> int:
    """unpack() into run_dir, first moving an unfinished run of this machine there aside (to <run_dir>.partial,
    kept): the archived finished run replaces it. Returns the step the run finished at."""
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()):
        import shutil

        aside = run_dir.with_name(run_dir.name + ".partial")
        shutil.rmtree(aside, ignore_errors=True)
        run_dir.rename(aside)
    return unpack(archive, run_dir)


def restore_if_archived(archive_dir: Path, run_dir: Path, settings: dict, settings_file: str) -> int | None:
    """Restore run_dir from `<archive_dir>/<run_dir name>.tar.xz` when that archive exists (the step it finished at;
    None: no archive). The run's settings (`settings_file`, written by the script that started it) must equal
    `settings`: an archive of a run made with other settings is refused, naming the fix."""
    src = archive_path(archive_dir, Path(run_dir).name)
    if not src.is_file():
        return None
    saved = read_member(src, settings_file)
    if saved is not None and json.loads(saved) != settings:
        raise DensecodeError(f"{src} holds a run made with other settings than this one ({settings_file} differs); "
                             "pass another archive folder, or delete that archive to rerun it")
    return restore(src, run_dir)


def archive_finished(run_dir: Path, archive_dir: Path, step: int) -> Path | None:
    """pack() a finished run unless its archive holds that step already (None: nothing written)."""
    dest = archive_path(archive_dir, Path(run_dir).name)
    if dest.is_file():
        saved = read_member(dest, MARKER)
        if saved is not None and int(json.loads(saved).get("step", -1)) >= int(step):
            return None
    return pack(run_dir, archive_dir, step)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="archive a finished run folder")
    a.add_argument("run_dir")
    a.add_argument("--to", required=True, help="archive folder")
    a.add_argument("--step", type=int, required=True, help="the step the run finished at")
    b = sub.add_parser("unpack", help="restore an archive into a run folder")
    b.add_argument("archive")
    b.add_argument("--to", required=True, help="run folder")
    args = p.parse_args(argv)
    try:
        if args.cmd == "pack":
            print(pack(Path(args.run_dir), Path(args.to), args.step))
        else:
            print(f"restored step {unpack(Path(args.archive), Path(args.to))} into {args.to}")
    except DensecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
