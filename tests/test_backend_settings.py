"""Every backend declares its ``-M`` settings, typed (:mod:`harness.backend_settings`), and takes no
other key: an unknown key near a declared one is refused naming it, a value of the wrong type is
refused in one line before the backend runs, the backend gets the values coerced to their types, and
``harness models NAME`` lists the declaration with types and defaults."""

from __future__ import annotations

import json
import types
import typing
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field
from typer.testing import CliRunner

from harness.backend_settings import (
    GENERATION,
    NonNegativeFloat,
    PositiveInt,
    Probability,
    Setting,
    describe,
    type_name,
)
from harness.cli import app
from harness.modelspec import build_model
from harness.registry import Entry, entries, lookup

# no setting is declared Any: each is typed, and the core checks it before the backend sees it
UNTYPED: dict[tuple[str, str], str] = {}
# every backend is strict; a backend listed here would take undeclared keys (none does)
NOT_STRICT: dict[str, str] = {}


def _backends() -> list[Entry]:
    # the project's own registrations (other tests register stand-ins of their own in this process)
    return [e for e in entries("model") if e.factory.__module__.startswith("harness.")]


def _scalar(tp: Any) -> Any | None:
    """int, float or bool, bounded (Annotated) or optional; None for any other type."""
    if typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        return _scalar(rest[0]) if len(rest) == 1 else None
    return tp if tp in (int, float, bool) else None


def _build(entry: Entry, key: str, value: str) -> Any:
    """The backend built with one setting (an operator around an offline model)."""
    if entry.operator:
        return build_model(f"{entry.name}(builtin:echo, {key}={value!r})")
    return build_model(f"{entry.name}:x", {key: value})


def test_the_backends_are_all_found() -> None:
    # every name, whoever registered it last: another test in this process may replace an entry with a
    # stand-in of its own under the same name (seen: builtin), which _backends() then leaves out
    names = {e.name for e in entries("model")}
    assert len({e.name for e in _backends()}) >= 40
    assert len(names) >= 46  # every family's backends, the general ones and the operators
    assert {"hf", "llamacpp", "vllm", "vllm-server", "openai", "builtin", "vote", "semknn", "ocp", "reid", "gs",
            "longshot-agent", "datasel", "code3d-standin"} <= names


def test_every_backend_declares_typed_settings_and_is_strict() -> None:
    for e in _backends():
        assert e.strict or e.name in NOT_STRICT, f"{e.name}: takes undeclared -M keys"
        for key, s in e.settings.items():
            assert isinstance(s, Setting) and s.doc, f"{e.name}: {key} has no meaning"
            assert s.type is not Any or (e.name, key) in UNTYPED, f"{e.name}: {key} is untyped"
    declared = {e.name: e.settings for e in _backends()}
    for name, key in UNTYPED:  # each exception still is one (a stale entry would cover a new one)
        assert declared[name][key].type is Any, (name, key)


def test_every_declared_default_is_a_value_of_its_type() -> None:
    for e in _backends():
        for key, s in e.settings.items():
            if s.type is not Any and s.default is not None:
                s.coerce(e.name, key, s.default)  # raises SettingError if not


def test_an_unknown_key_near_a_declared_one_is_refused_naming_it() -> None:
    for e in _backends():
        # the longest key is the most distinctive; a backend declaring none takes the generation keys
        key = max(e.settings or GENERATION, key=len)
        near = key[:-1] + "x" + key[-1]
        with pytest.raises(ValueError) as info:
            _build(e, near, "1")
        message = str(info.value)
        assert "\n" not in message and "did you mean" in message and repr(key) in message, (e.name, message)
        assert message.startswith(f"{e.name}: unknown "), (e.name, message)


def test_a_wrongly_typed_value_is_refused_in_one_line_before_the_backend_runs() -> None:
    for e in _backends():
        own = [k for k, s in e.settings.items() if _scalar(s.type) is not None]
        key = own[0] if own else "max_tokens"  # a backend declaring none takes the generation keys
        with pytest.raises(ValueError) as info:
            _build(e, key, "abc")
        message = str(info.value)
        assert message.startswith(f"{e.name}: bad setting value: {key}='abc' must be "), (e.name, message)
        assert "\n" not in message


def test_the_backend_gets_the_values_coerced_to_their_types() -> None:
    from harness.models.vllm_config import parse_settings

    assert build_model("dsgg-prior:freq", {"top": "5"}).top == 5
    assert build_model("spa3d:fit", {"cache": "no", "steps": "3"}).cache is False
    assert parse_settings("m", {"chat": "false"}).chat is False  # bool("false") was True
    op = build_model("vote(builtin:echo, n='3')")
    assert op.params["n"] == 3
    assert build_model("omt:auto", {"anneal": "false"}).settings["anneal"] is False


def test_an_operator_takes_only_its_parameters() -> None:
    with pytest.raises(ValueError, match=r"vote: unknown parameter\(s\) max_tokens"):
        build_model("vote(builtin:echo, max_tokens=5)")  # the generation keys are its models' (-M)
    with pytest.raises(ValueError, match="semknn: unknown parameter"):
        build_model("semknn(builtin:echo, lamda=0.1)")


def test_settings_of_another_path_are_refused_by_the_path() -> None:
    with pytest.raises(ValueError, match="does not apply"):
        build_model("ocp:aci", {"lr": 0.1})
    with pytest.raises(ValueError, match="bounds:manski: unknown setting 'information'"):
        build_model("bounds:manski", {"information": "pag"})


def test_vllm_engine_arguments_not_declared_go_in_engine() -> None:
    from harness.models.vllm_config import parse_settings

    with pytest.raises(ValueError, match="vllm: unknown setting 'swap_spaces'; did you mean 'swap_space'"):
        build_model("vllm:some/model", {"swap_spaces": 4})
    parsed = parse_settings("m", {"engine": {"seed_offset": 3}, "tensor_parallel_size": "2"})
    assert parsed.engine["seed_offset"] == 3 and parsed.engine["tensor_parallel_size"] == 2


def test_the_declarations_match_what_the_backends_read() -> None:
    from dataclasses import fields

    from harness.models.openai import ADAPTER, OpenAISettings
    from harness.models.vllm_config import SAMPLING
    from harness.models.vllm_inputs import SAMPLING_EXTRAS
    from harness.tasks.agents.backends import vla
    from harness.tasks.agents.backends.vla_core import TrainConfig as VLAConfig
    from harness.tasks.methods.backends import htaf
    from harness.tasks.methods.backends.htaf_core import TrainConfig as HTAFConfig
    from harness.tasks.reid.backends import models as reid
    from harness.tasks.reid.backends.net import TrainConfig as ReIDConfig

    assert set(ADAPTER) == {f.name for f in fields(OpenAISettings)} - {"model"} | {"api_key", "key"}
    assert set(SAMPLING) == set(SAMPLING_EXTRAS)
    # defaults written out where the config's module imports torch: they are the config's
    written = ((vla.SETTINGS, VLAConfig(), vla.TRAINING), (reid.SETTINGS, ReIDConfig(), reid._TRAIN),
               (htaf.SETTINGS, HTAFConfig(), [k for k in htaf._TRAIN if k != "depth"]))  # depth: heaviside's 4
    for declared, config, keys in written:
        for key in keys:
            assert declared[key].default == getattr(config, key), key


@pytest.mark.parametrize("name", ["hf", "llamacpp", "openai", "ocp", "reid"])
def test_harness_models_lists_the_declared_settings(name: str) -> None:
    result = CliRunner().invoke(app, ["models", name, "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    entry = lookup("model", name)
    assert info["strict"] is True
    rows = {r["setting"]: r for r in info["settings"] if r["scope"] == "backend"}
    assert set(rows) == set(entry.settings) and len(rows) > 3
    for key, s in entry.settings.items():
        assert (rows[key]["type"], rows[key]["default"], rows[key]["meaning"]) == (type_name(s.type), s.default, s.doc)
    assert {r["setting"] for r in info["settings"] if r["scope"] != "backend"} == set(GENERATION)


def _listed(name: str) -> dict[str, dict[str, Any]]:
    return {r["setting"]: r for r in json.loads(CliRunner().invoke(app, ["models", name, "--json"]).output)["settings"]}


def test_harness_models_says_the_types_as_a_reader_does() -> None:
    rows = _listed("ocp")
    assert (rows["sigma"]["type"], rows["sigma"]["default"]) == ("float > 0 and <= 1", 0.001)
    assert (rows["lifetime"]["type"], rows["lifetime"]["default"]) == ("int >= 1", 8)
    rows = _listed("openai")
    assert rows["mode"]["type"] == "'chat' | 'completions'" and rows["headers"]["type"] == "mapping"
    assert rows["price_in"]["type"] == "float >= 0 | null"


def test_describe_and_type_name_of_every_declared_type() -> None:
    seen = {s.type for e in _backends() for s in (*e.settings.values(), *GENERATION.values()) if s.type is not Any}
    assert len(seen) > 20
    for tp in seen:
        for text in (describe(tp), type_name(tp)):
            assert text and "typing." not in text and "<class" not in text and "Annotated" not in text, (tp, text)
    cases = [(PositiveInt, "an integer >= 1", "int >= 1"), (NonNegativeFloat | None, "a number >= 0 or null",
             "float >= 0 | null"), (Probability, "a number >= 0 and <= 1", "float >= 0 and <= 1"),
             (Annotated[float, Field(gt=0, le=1)], "a number > 0 and <= 1", "float > 0 and <= 1"),
             (Literal["pag", "known_graph"], "one of 'pag', 'known_graph'", "'pag' | 'known_graph'"),
             (list[str] | str, "a list of strings or a string", "list[str] | str"),
             (dict[str, Any] | None, "a mapping or null", "mapping | null"), (bool, "true or false", "bool"),
             (str | None, "a string or null", "str | null"), (list[int] | None, "a list of integers or null",
                                                               "list[int] | null")]
    for tp, said, named in cases:
        assert (describe(tp), type_name(tp)) == (said, named)


def test_a_task_option_outside_its_annotated_bound_is_one_line() -> None:
    from harness.run_config import RunConfigError, build_task

    with pytest.raises(RunConfigError) as info:
        build_task("reid_aerial_ground", {"seed": -1})
    assert str(info.value) == "task 'reid_aerial_ground': -T seed must be an integer >= 0, got -1"
    with pytest.raises(RunConfigError, match="-T workers must be an integer >= 1, got 0"):
        build_task("reid_aerial_ground", {"workers": 0})
