"""densecode.eval.run_archive: a finished run's result files in one archive, restored on another machine as a
finished run of the sweep; archives it did not write, or made with other settings, are refused by name."""

import io
import json
import tarfile

import pytest

from densecode.errors import DensecodeError
from densecode.eval.run_archive import archived_step, main, pack, read_member, replace_member, unpack
from densecode.eval.sweep import RunSpec, restore_archived, run_state


def make_run(run_dir, spec=None):
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"kind": "train", "step": 1}\n')
    (run_dir / "eval_tasks.jsonl").write_text('{"step": 0, "pass": "greedy", "values": [1, 0]}\n')
    (run_dir / "config.yaml").write_text("domain: robotics\n")
    if spec is not None:
        (run_dir / "sweep.json").write_text(json.dumps(spec.settings()))
    (run_dir / "checkpoints" / "step-000010").mkdir(parents=True)
    (run_dir / "checkpoints" / "step-000010" / "model.safetensors").write_bytes(b"weights")
    (run_dir / "core").write_bytes(b"not a result file")


def test_pack_keeps_result_files_only_and_unpack_restores_them(tmp_path):
    run = tmp_path / "runs" / "dense-seed0"
    make_run(run)
    archive = pack(run, tmp_path / "archive", step=10)
    assert archive.name == "dense-seed0.tar.xz" and not list((tmp_path / "archive").glob("*.tmp"))
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["archived.json", "config.yaml", "eval_tasks.jsonl", "metrics.jsonl"]
    other = tmp_path / "elsewhere" / "dense-seed0"
    assert unpack(archive, other) == 10 and archived_step(other) == 10
    for name in ("metrics.jsonl", "eval_tasks.jsonl", "config.yaml"):
        assert (other / name).read_bytes() == (run / name).read_bytes()
    assert not (other / "checkpoints").exists() and archived_step(run) is None


def test_replace_member_rewrites_one_file_and_keeps_the_others(tmp_path):
    run = tmp_path / "runs" / "dense-seed0"
    make_run(run, RunSpec(name="dense-seed0", run_dir=run, config="codegen", steps=10))
    archive = pack(run, tmp_path / "archive", step=10)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    replace_member(archive, "sweep.json", b'{"config": "codegen-gae"}')
    with tarfile.open(archive) as tar:
        assert tar.getnames() == names
    assert read_member(archive, "sweep.json") == b'{"config": "codegen-gae"}'
    assert read_member(archive, "metrics.jsonl") == (run / "metrics.jsonl").read_bytes()
    assert unpack(archive, tmp_path / "elsewhere" / "dense-seed0") == 10
    with pytest.raises(DensecodeError, match="no member nothing.json"):
        replace_member(archive, "nothing.json", b"{}")
    assert not list((tmp_path / "archive").glob("*.tmp"))


def test_pack_refuses_a_folder_that_is_no_run(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(DensecodeError, match="no metrics.jsonl"):
        pack(tmp_path / "x", tmp_path / "archive", step=1)


def test_unpack_refuses_archives_it_did_not_write(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../escape.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DensecodeError, match="not top-level files"):
        unpack(evil, tmp_path / "run")
    assert not (tmp_path / "escape.txt").exists()
    (tmp_path / "broken.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(DensecodeError, match="cannot be read.*delete it"):
        unpack(tmp_path / "broken.tar.gz", tmp_path / "run2")
    assert main(["unpack", str(tmp_path / "broken.tar.gz"), "--to", str(tmp_path / "run3")]) == 2


def test_sweep_restores_archived_runs_as_finished_and_refuses_other_settings(tmp_path):
    spec = RunSpec("dense-seed0", tmp_path / "a" / "dense-seed0", "robotics", 10, ["reward.mode=dense"])
    make_run(spec.run_dir, spec)
    pack(spec.run_dir, tmp_path / "archive", step=10)
    # The next machine: same spec, a new folder holding only a partial run of its own.
    moved = RunSpec("dense-seed0", tmp_path / "b" / "dense-seed0", "robotics", 10, ["reward.mode=dense"])
    moved.run_dir.mkdir(parents=True)
    (moved.run_dir / "config.yaml").write_text("partial\n")
    assert run_state(moved) == "partial"
    restore_archived([moved], tmp_path / "archive")
    assert run_state(moved) == "finished"
    assert (moved.run_dir / "eval_tasks.jsonl").read_text() == (spec.run_dir / "eval_tasks.jsonl").read_text()
    assert (moved.run_dir.with_name("dense-seed0.partial") / "config.yaml").read_text() == "partial\n"
    # A longer run is not finished by a shorter archive; an archive of other settings is refused, naming the fix.
    longer = RunSpec("dense-seed0", tmp_path / "c" / "dense-seed0", "robotics", 20, ["reward.mode=dense"])
    with pytest.raises(DensecodeError, match="other settings.*delete that archive"):
        restore_archived([longer], tmp_path / "archive")
    assert not longer.run_dir.exists()


def test_ablation_reuses_the_main_comparisons_dense_and_sparse_runs(tmp_path):
    from benchmarks.experiments import dense_vs_sparse as bench

    main = [RunSpec(f"{a}-seed0", tmp_path / "main" / f"{a}-seed0", "robotics", 10, [f"reward.mode={a}"])
            for a in ("dense", "sparse")]
    for spec in main:
        make_run(spec.run_dir, spec)
        pack(spec.run_dir, tmp_path / "dense_vs_sparse-robotics", step=10)
    ablation = [RunSpec(f"{a}-seed0", tmp_path / "abl" / f"{a}-seed0", "robotics", 10, [f"reward.mode={a}"])
                for a in ("dense", "sparse")]
    ablation.append(RunSpec("last-sim-seed0", tmp_path / "abl" / "last-sim-seed0", "robotics", 10, ["x=1"]))
    restored = bench.reuse_main_runs(ablation, tmp_path / "dense_vs_sparse-robotics")
    assert restored == ["dense-seed0", "sparse-seed0"]
    assert [run_state(s) for s in ablation] == ["finished", "finished", "new"]
    assert bench.reuse_main_runs(ablation, tmp_path / "nowhere") == []
