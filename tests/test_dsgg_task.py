"""The dsgg task: parser on good and malformed replies, loaders (AG pickles, VidVRD JSON, PVSG JSON),
STTran-format predictions, pooled aggregation, and end-to-end ``harness eval`` into SQLite."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import sqlite3
import subprocess
import sys

import pytest

from harness.runner import build_task
from harness.task import SampleRecord, ScoreContext
from harness.tasks.dsgg import data as D
from harness.tasks.dsgg.aggregate import aggregate, summary
from harness.tasks.dsgg.models import FrequencyPrior
from harness.tasks.dsgg.trs import ParseError, expand, parse_reply, to_trs
from harness.tasks.dsgg.vocab import ag_objects, ag_predicates
from harness.types import Output, Request

PREDS = list(ag_predicates())


def test_class_lists_shipped_with_sttran_names():
    assert len(ag_objects()) == 36 and ag_objects()[0] == "person" and "cup/glass/bottle" in ag_objects()
    assert len(PREDS) == 26 and PREDS[:3] == ["looking_at", "not_looking_at", "unsure"]
    assert PREDS[9] == "carrying" and PREDS[14] == "holding"


# ---------------------------------------------------------------------------------------------- parser

GOOD = """The person picks up a cup and drinks.
```json
{"relations": [
  {"subject": "person", "predicate": "holding", "object": "cup/glass/bottle", "spans": [[0, 3]],
   "boxes": {"1": {"subject": [0, 0, 9, 9], "object": [20, 20, 29, 29]}}},
  {"subject": "person", "predicate": "Looking At", "object": "cup/glass/bottle", "spans": [[2, 99]]},
  {"subject": "person", "predicate": "juggling", "object": "cup/glass/bottle", "spans": [[0, 1]]},
  {"subject": "person", "object": "cup/glass/bottle"}
]}
```"""


def test_parser_good_reply_normalises_and_drops_bad_relations():
    trs, dropped = parse_reply(GOOD, PREDS, n_frames=5)
    assert [r["predicate"] for r in trs] == ["holding", "looking_at"]
    assert trs[1]["spans"] == [(2, 4)]  # clipped to the video
    assert trs[0]["boxes"]["1"]["object"] == [20.0, 20.0, 29.0, 29.0]
    assert len(dropped) == 2 and "juggling" in dropped[0] and "malformed" in dropped[1]


@pytest.mark.parametrize("reply", [
    "", "I cannot see the video.", '{"relations": ', "```json\n{not json}\n```", '{"answer": 3}', "[1, 2, 3]",
])
def test_parser_malformed_reply_raises_one_line_parse_error(reply):
    with pytest.raises(ParseError) as exc:
        parse_reply(reply, PREDS, n_frames=5)
    assert "\n" not in str(exc.value)


def test_parser_takes_the_last_json_and_bare_lists():
    text = 'Example: {"relations": []}\nAnswer: [{"subject": "person", "predicate": "holding", "object": "book"}]'
    trs, _ = parse_reply(text, PREDS, n_frames=3)
    assert trs == [{"subject": "person", "predicate": "holding", "object": "book", "spans": [(0, 2)], "boxes": {}}]


def test_expand_grounds_by_name_and_to_trs_merges_runs():
    video = D.synthetic_videos(1)[0]
    trs = to_trs(video)
    assert all(isinstance(s, list) for r in trs for s in r["spans"])
    assert sum(b - a + 1 for r in trs for a, b in r["spans"]) == len(video["relations"])
    rows = expand([{**r, "boxes": {}} for r in trs], video, ground=True)
    assert {(f, s, p, o) for f, s, p, o, _, _ in rows} == {tuple(r) for r in video["relations"]}
    assert all(sb is not None and ob is not None for *_, sb, ob in rows)
    assert all(sb is None for *_, sb, _ in expand([{**r, "boxes": {}} for r in trs], video, ground=False))


# ---------------------------------------------------------------------------------------------- loaders

def test_action_genome_pickles_round_trip(tmp_path):
    videos = D.synthetic_videos(3, seed=1)
    D.write_action_genome(videos, tmp_path)
    loaded = D.load_action_genome(tmp_path, "test")
    assert [v["video_id"] for v in loaded] == sorted(v["video_id"] for v in videos)
    by_id = {v["video_id"]: v for v in videos}
    for v in loaded:
        src = by_id[v["video_id"]]
        assert sorted(map(tuple, v["relations"])) == sorted(map(tuple, src["relations"]))
        assert v["boxes"]["person"] == src["boxes"]["person"]
        for name in src["objects"]:
            assert v["boxes"][name] == pytest.approx(src["boxes"][name])


def test_action_genome_bad_name_is_a_dataset_error(tmp_path):
    videos = D.synthetic_videos(1)
    ann = D.write_action_genome(videos, tmp_path)
    objs = pickle.loads((ann / "object_bbox_and_relationship.pkl").read_bytes())
    next(iter(objs.values()))[0]["class"] = "spaceship"
    (ann / "object_bbox_and_relationship.pkl").write_bytes(pickle.dumps(objs))
    with pytest.raises(D.DatasetError, match="spaceship"):
        D.load_action_genome(tmp_path)


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_action_genome_pickles_are_read_as_data(tmp_path):
    from harness.safeload import SafeLoadError

    ann = D.write_action_genome(D.synthetic_videos(1), tmp_path)
    person = ann / "person_bbox.pkl"
    good = person.read_bytes()
    marker = tmp_path / "ran"
    table = pickle.loads(good)
    table[next(iter(table))]["bbox"] = _Payload(marker)
    person.write_bytes(pickle.dumps(table))
    with pytest.raises(SafeLoadError, match="person_bbox.pkl: refused global posix.system") as err:
        D.load_action_genome(tmp_path)
    assert "\n" not in str(err.value) and not marker.exists()
    # plain data of the wrong shape: one line naming the file or folder, never a traceback
    person.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(D.DatasetError, match="person_bbox.pkl: expected a dict"):
        D.load_action_genome(tmp_path)
    person.write_bytes(good)
    objects = ann / "object_bbox_and_relationship.pkl"
    objects.write_bytes(pickle.dumps({"v.mp4/000001.png": "not a list of objects"}))
    with pytest.raises(D.DatasetError, match="malformed Action Genome annotation pickles") as err:
        D.load_action_genome(tmp_path)
    assert "\n" not in str(err.value)


def test_replayed_predictions_are_read_as_data(tmp_path):
    from harness.safeload import SafeLoadError
    from harness.tasks.dsgg.models import dsgg_replay

    marker = tmp_path / "ran"
    path = tmp_path / "preds.pkl"
    path.write_bytes(pickle.dumps({"v1": {"format": "sttran", "boxes": _Payload(marker)}}))
    with pytest.raises(SafeLoadError, match="refused global posix.system"):
        dsgg_replay(str(path))
    assert not marker.exists()
    deep = tmp_path / "deep.json"
    deep.write_text('{"v1": ' + "[" * 5000 + "]" * 5000 + "}")  # _plain would recurse through it
    with pytest.raises(ValueError, match="deep.json"):
        dsgg_replay(str(deep))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json: not a JSON file"):
        dsgg_replay(str(broken))


def _vidvrd_json(tmp_path):
    box = lambda x: {"xmin": x, "ymin": 0, "xmax": x + 9, "ymax": 9}  # noqa: E731
    anno = {"video_id": "ILSVRC_v1", "frame_count": 6,
            "subject/objects": [{"tid": 0, "category": "dog"}, {"tid": 1, "category": "ball"},
                                {"tid": 2, "category": "dog"}],
            "trajectories": [[{"tid": 0, "bbox": box(0)}, {"tid": 1, "bbox": box(30)}, {"tid": 2, "bbox": box(60)}]
                             for _ in range(6)],
            "relation_instances": [{"subject_tid": 0, "predicate": "chase", "object_tid": 1, "begin_fid": 0,
                                    "end_fid": 4},
                                   {"subject_tid": 2, "predicate": "watch", "object_tid": 0, "begin_fid": 2,
                                    "end_fid": 6}]}
    (tmp_path / "test").mkdir(parents=True)
    (tmp_path / "test" / "ILSVRC_v1.json").write_text(json.dumps(anno))
    return tmp_path


def _pvsg_json(tmp_path):
    anno = {"objects": {"thing": ["adult", "cup"], "stuff": ["floor"]}, "relations": ["holding", "on"],
            "split": {"vidor": {"train": [], "val": ["0001_1"]}},
            "data": [{"video_id": "0001_1", "meta": {"num_frames": 8},
                      "objects": [{"object_id": 1, "category": "adult"}, {"object_id": 2, "category": "cup"},
                                  {"object_id": 3, "category": "floor"}],
                      "relations": [[1, 2, "holding", [[0, 3]]], [2, 3, "on", [[4, 7]]]]}]}
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pvsg.json").write_text(json.dumps(anno))
    return tmp_path


def test_vidvrd_loader_names_repeated_instances(tmp_path):
    (v,) = D.load_vidvrd(_vidvrd_json(tmp_path), "test")
    assert v["objects"] == {"dog#1": "dog", "ball": "ball", "dog#2": "dog"}
    assert len(v["relations"]) == 4 + 4 and v["boxes"]["ball"]["0"] == [30, 0, 39, 9]


def test_pvsg_loader_inclusive_spans(tmp_path):
    (v,) = D.load_pvsg(_pvsg_json(tmp_path), "val")
    assert v["n_frames"] == 8 and len(v["relations"]) == 8 and v["objects"]["adult"] == "adult"


# ---------------------------------------------------------------------------------------------- scoring

def _score_all(task, replies):
    records = []
    for s in task.load():
        reply = replies(s)
        out = reply if isinstance(reply, Output) else Output(text=reply)
        sc = task.score(s, out, ScoreContext())
        records.append(SampleRecord(s.id, 0, sc.values, sc.unscored, None, s.metadata, 0.0, sc.details))
    return records


def test_perfect_trs_scores_one_and_padding_lowers_precision_not_recall():
    task = build_task("dsgg", {})
    perfect = _score_all(task, lambda s: json.dumps({"relations": to_trs(s.target)}))
    m = summary(aggregate(perfect))
    assert m["R@20"] == 1.0 and m["precision"] == 1.0 and m["recall"] == 1.0 and m["redundancy"] == 0.0
    assert m["informative_recall"] == 1.0 and m["unscored"] == 0.0
    present = {r[2] for s in task.load() for r in s.target["relations"]}
    assert m["mR@20"] == pytest.approx(len(present) / 26, rel=1e-9)  # absent predicates add 0

    def padded(s):  # every relation twice: the recall-only protocol cannot tell
        trs = to_trs(s.target)
        return json.dumps({"relations": trs + trs})

    m2 = summary(aggregate(_score_all(task, padded)))
    assert m2["R@20"] == 1.0 and m2["recall"] == 1.0
    assert m2["precision"] == pytest.approx(0.5) and m2["redundancy"] == pytest.approx(0.5)
    assert m2["temporal_redundancy"] == pytest.approx(0.5)
    metrics = aggregate(padded_records := _score_all(task, padded))
    prec = next(x for x in metrics if x.name == "precision" and not x.breakdown_key)
    assert prec.ci_low <= prec.value <= prec.ci_high and prec.n == len(padded_records)
    assert any(x.breakdown_key == "length" for x in metrics)


def test_pooled_recall_averages_frames_not_videos():
    task = build_task("dsgg", {})

    def first_frame_only(s):
        return json.dumps({"relations": [{**r, "spans": [[0, 0]]} for r in to_trs(s.target) if r["spans"][0][0] == 0]})

    records = _score_all(task, first_frame_only)
    frames = sum(s.target["n_frames"] for s in task.load())
    m = summary(aggregate(records))
    assert m["R@20"] == pytest.approx(12 / frames)
    per_video = sum(r.scores["R@20"] for r in records) / len(records)
    assert per_video == pytest.approx(sum(1 / s.target["n_frames"] for s in task.load()) / 12)
    assert abs(per_video - m["R@20"]) > 1e-3


def test_malformed_replies_are_unscored_and_counted_or_zero():
    task = build_task("dsgg", {})
    records = _score_all(task, lambda s: "no json here" if s.id.endswith("0.mp4") else json.dumps(
        {"relations": to_trs(s.target)}))
    bad = [r for r in records if r.unscored]
    assert bad and all(r.unscored.startswith("parse error") for r in bad)
    m = summary(aggregate(records))
    assert m["parse_errors"] == len(bad) and m["R@20"] == 1.0
    zero = build_task("dsgg", {"parse_errors": "zero"})
    m0 = summary(aggregate(_score_all(zero, lambda s: "no json here")))
    assert m0["R@20"] == 0.0 and m0["parse_errors"] == 12 and m0["unscored"] == 0


def test_sgdet_setting_needs_boxes():
    task = build_task("dsgg", {"setting": "sgdet"})
    labels_only = summary(aggregate(_score_all(task, lambda s: json.dumps({"relations": to_trs(s.target)}))))
    assert labels_only["R@20"] == 0.0 and labels_only["triplet_recall"] == 1.0


@pytest.mark.parametrize("floor", [0.01, 0.0])
def test_sttran_format_prediction_all_constraints(floor):
    task = build_task("dsgg", {})
    oid = {n: i for i, n in enumerate(ag_objects())}

    def sttran(s):
        v = s.target
        boxes, labels, pairs, pf, att, spa, con = [], [], [], [], [], [], []
        for f in range(v["n_frames"]):
            base = len(boxes)
            boxes.append(v["boxes"]["person"][str(f)]), labels.append(1)
            for name in v["objects"]:
                if name == "person":
                    continue
                j = len(boxes)
                boxes.append(v["boxes"][name][str(f)]), labels.append(oid[name] + 1)
                rels = {r[2] for r in v["relations"] if r[0] == f and name in (r[1], r[3])}
                pairs.append([base, j]), pf.append(f)
                att.append([1.0 if p in rels else floor for p in PREDS[:3]])
                spa.append([1.0 if p in rels else floor for p in PREDS[3:9]])
                con.append([1.0 if p in rels else floor for p in PREDS[9:]])
        return Output(prediction={"format": "sttran", "boxes": boxes, "labels": labels,
                                  "obj_scores": [1.0] * len(labels), "pair_idx": pairs, "pair_frame": pf,
                                  "attention": att, "spatial": spa, "contacting": con})

    m = summary(aggregate(_score_all(task, sttran)))
    assert m["R@20"] == 1.0 and m["R@20_no"] == 1.0 and m["precision"] == 1.0
    # semi: like STTran, a spatial/contacting row counts only when its first two scores sum above 0, so
    # exact-zero one-hot rows (impossible after sigmoid) are dropped
    assert m["R@20_semi"] == 1.0 if floor else m["R@20_semi"] < 1.0
    bad = task.score(task.load()[0], Output(prediction={"format": "sttran", "boxes": [[0, 0, 1, 1]]}),
                     ScoreContext())
    assert bad.unscored and "STTran" in bad.unscored


def test_vidvrd_and_pvsg_protocols_on_perfect_sets(tmp_path):
    vid = build_task("dsgg", {"dataset": "vidvrd", "data_dir": str(_vidvrd_json(tmp_path / "v"))})
    m = summary(aggregate(_score_all(vid, lambda s: json.dumps({"relations": to_trs(s.target)}))))
    assert m["vidvrd_mAP"] == 1.0 and m["vidvrd_R@50"] == 1.0 and m["vidvrd_tagging_P@1"] == 1.0
    pv = build_task("dsgg", {"dataset": "pvsg", "data_dir": str(_pvsg_json(tmp_path / "p")), "split": "val"})
    m = summary(aggregate(_score_all(pv, lambda s: json.dumps({"relations": to_trs(s.target)}))))
    assert m["pvsg_recall@20"] == 1.0 and m["pvsg_mean_recall@20"] == 1.0
    late = summary(aggregate(_score_all(pv, lambda s: json.dumps({"relations": [
        {**r, "spans": [[r["spans"][0][0] + 2, r["spans"][0][1] + 2]]} for r in to_trs(s.target)]}))))
    assert late["pvsg_recall@20"] == 1.0  # 2/4 frames overlap: vIoU 0.5 is still a hit
    assert late["pvsg_soft_recall@20"] == pytest.approx(0.5)


def test_vidvrd_without_data_dir_is_a_clear_error():
    with pytest.raises(D.DatasetError, match="data_dir"):
        build_task("dsgg", {"dataset": "vidvrd"}).load()


def test_frequency_prior_learns_from_train_split():
    task = build_task("dsgg", {})
    prior = FrequencyPrior()
    info = prior.fit(list(task.train()))
    assert info["videos"] == 24
    samples = task.load()
    outs = asyncio.run(prior.generate([Request(s.messages, sample_id=s.id) for s in samples]))
    records = [SampleRecord(s.id, 0, sc.values, sc.unscored, None, s.metadata, 0.0, sc.details)
               for s, o in zip(samples, outs, strict=True) for sc in [task.score(s, o, ScoreContext())]]
    m = summary(aggregate(records))
    assert 0.3 < m["R@20"] < 1.0 and m["unscored"] == 0


# ---------------------------------------------------------------------------------------------- CLI

def _harness(*args):
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=180, env=env)


def test_cli_eval_prior_and_constant_into_sqlite(tmp_path):
    db = tmp_path / "h.db"
    url = f"sqlite:///{db}"
    r = _harness("eval", "--task", "dsgg", "--model", "dsgg-prior:freq", "-M", "per_group=2", "--db", url)
    assert r.returncode == 0, r.stderr
    assert "12 new" in r.stdout and "R@20" in r.stdout and "precision" in r.stdout
    r = _harness("eval", "--task", "dsgg", "--model", "builtin:constant", "-M", "text=no idea", "--db", url)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    rows = dict(con.execute("select m.name, m.value from metrics m join runs r on r.id = m.run_id "
                            "where r.name like 'dsgg__builtin%' and m.breakdown_key = ''").fetchall())
    assert rows["parse_errors"] == 12 and rows["unscored"] == 12 and "R@20" not in rows
    prior = dict(con.execute("select m.name, m.value from metrics m join runs r on r.id = m.run_id "
                             "where r.name like 'dsgg__dsgg-prior%' and m.breakdown_key = ''").fetchall())
    assert prior["precision"] < 1.0 and prior["R@20_no"] >= prior["R@20"]
    stored = con.execute("select prediction, details from sample_results "
                         "where prediction is not null limit 1").fetchone()
    assert json.loads(stored[0])["relations"] and "recall" in json.loads(stored[1])

    from harness.store.db import open_db
    from harness.tasks.dsgg import analysis

    fig = analysis.chart(open_db(url))
    assert fig is not None and len(fig["data"][0]["x"]) == 1  # the constant model has no precision row


def test_replay_model_reads_pickled_numpy_predictions(tmp_path):
    import numpy as np

    from harness.tasks.dsgg.models import dsgg_replay

    path = tmp_path / "preds.pkl"
    path.write_bytes(pickle.dumps({"v1": {"format": "sttran", "boxes": np.zeros((2, 4))}, "v2": "no json"}))
    model = dsgg_replay(str(path))
    outs = asyncio.run(model.generate([Request([], sample_id=i) for i in ("v1", "v2", "v3")]))
    assert outs[0].prediction == {"format": "sttran", "boxes": [[0.0] * 4] * 2}
    assert outs[1].text == "no json" and outs[2].error and "v3" in outs[2].error
    with pytest.raises(ValueError, match="not found"):
        dsgg_replay(str(tmp_path / "missing.json"))
