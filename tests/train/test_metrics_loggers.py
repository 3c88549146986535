"""TensorBoard (`tb` extra) and Weights & Biases offline (`wandb` extra) get every numeric field of
the step records under the names `metrics.jsonl` uses."""

import json
import struct
import time

import pytest

from rlgym_llm.train.metrics import MetricsLog, scalars

RECORDS = [
    {"step": 1, "success": 0.25, "loss": 0.5, "failures/env": 1, "skipped_update": False, "adv_std": float("nan")},
    {"step": 2, "success": 0.5, "loss": 0.25, "failures/env": 0, "skipped_update": True, "adv_std": 0.3},
]
NAMES = {"success", "loss", "failures/env", "adv_std"}


def test_scalars_are_the_numbers_of_a_record():
    assert set(scalars(RECORDS[0])) == NAMES - {"adv_std"}  # NaN, flags and the step are not scalars
    assert set(scalars(RECORDS[1])) == NAMES


def test_tensorboard_event_files_hold_every_metric(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path, tensorboard=True)
    for r in RECORDS:
        log.write(r)
    log.close()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == NAMES
    assert [(e.step, e.value) for e in events.Scalars("success")] == [(1, 0.25), (2, 0.5)]
    assert [r["step"] for r in log.read()] == [1, 2]


def _offline_runs(out):
    return sorted((out / "wandb").glob("offline-run-*"))


def wandb_history(run_dir, timeout_s=20.0):
    """The history rows ({name: value} per `wandb.log`) of an offline run's `.wandb` file: a
    LevelDB-style log (32 KiB blocks of records with a 7-byte header) of `Record` protobufs.
    wandb's writer process may still be flushing after `finish()` returns: read until the run's
    `exit` record is there."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("run-*.wandb")
    deadline = time.monotonic() + timeout_s
    while True:
        data, pos, buf, rows, kinds = path.read_bytes(), 7, b"", [], []  # 7 bytes: ":W&B", magic, version
        while pos + 7 <= len(data):
            if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
                pos += 32768 - pos % 32768
                continue
            _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
            buf, pos = buf + data[pos + 7 : pos + 7 + length], pos + 7 + length
            if kind in (1, 4):  # a full record, or the last piece of one
                record = pb.Record()
                record.ParseFromString(buf)
                kinds.append(record.WhichOneof("record_type"))
                if kinds[-1] == "history":
                    items = record.history.item
                    rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items})
                buf = b""
        if "exit" in kinds or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def test_wandb_offline_run_holds_the_same_names_and_resumes_the_same_run(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    log = MetricsLog(tmp_path, tensorboard=False, wandb={"project": "rlgym-test", "config": {"seed": 3}})
    for r in RECORDS:
        log.write(r)
    log.close()
    (run,) = _offline_runs(tmp_path)
    rows = [{k: v for k, v in row.items() if not k.startswith("_")} for row in wandb_history(run)]
    assert rows == [scalars(r) for r in RECORDS]  # the same names and values, nothing added
    run_id = (tmp_path / "wandb_run_id").read_text()
    assert run.name.endswith(run_id)
    again = MetricsLog(tmp_path, tensorboard=False, wandb={"project": "rlgym-test"})
    again.write({"step": 3, "success": 1.0})
    again.close()
    assert all(r.name.endswith(run_id) for r in _offline_runs(tmp_path))  # the resumed run keeps its id


def test_the_config_turns_them_on(tmp_path):
    from rlgym_llm.config import load_config

    cfg = load_config("train", ["log.wandb=true", "log.wandb_project=mine", "log.tensorboard=false"])
    assert (cfg.log.wandb, cfg.log.wandb_project, cfg.log.tensorboard) == (True, "mine", False)


@pytest.mark.slow
def test_rlgym_train_logs_to_tensorboard_and_wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlgym_llm.cli.main import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    args = ["train", f"out_dir={tmp_path}", "sft.enabled=false", "progress=false", "trainer.steps=1"]
    args += ["trainer.tasks_per_step=2", "trainer.group_size=2", "trainer.eval_tasks=0", "trainer.threads=1"]
    assert main([*args, "log.wandb=true"]) == 0
    record = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(scalars(record))
    (run,) = _offline_runs(tmp_path)
    (row,) = wandb_history(run)
    assert {k: v for k, v in row.items() if not k.startswith("_")} == scalars(record)
    assert b"group_size" in next(run.glob("run-*.wandb")).read_bytes()  # the run's config went along
