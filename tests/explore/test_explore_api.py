"""The explorer's JSON API without a browser: a family is `plan --json`, a member's detail is `calc --json`
for the command line the answer shows, a study's panel is `recommend --json`; a bad input is a 400 with the
command line's own one-line message; a defect is a 500 and the server goes on."""

from __future__ import annotations

import copy
import os
import urllib.parse
from pathlib import Path

import pytest

from explore_helpers import argv_of_command, get

QUERIES = [
    {"params": "124M", "count": "7"},
    {"flops": "1e19", "tokens_per_param": "20", "seq_len": "2048", "max_seq_len": "2048", "hardware": "a100"},
    {"params": "1M", "vocab": "256", "max_seq_len": "128", "align": "16", "head_dim": "16", "kv_group": "2",
     "ffn": "swiglu", "norm": "rmsnorm", "pos": "rope", "tp": "2", "batch": "4", "untied": None},
    {"params": "7B", "like": "llama-2-7b", "seq_len": "4096", "pp": "4", "microbatches": "16", "dtype": "fp8",
     "convention": "megatron", "hardware": "h200", "count": "4"},
]


def _query(values: dict) -> str:
    return urllib.parse.urlencode({k: v for k, v in values.items() if v is not None})


def _plan_argv(values: dict) -> list[str]:
    argv = ["plan"]
    for k, v in values.items():
        argv += [f"--{k.replace('_', '-')}"] + ([] if v is None else [v])
    return argv + ["--json"]


@pytest.mark.parametrize("values", QUERIES, ids=["params", "flops", "conventions", "preset-pipeline"])
def test_a_family_is_plan_json_and_each_detail_is_calc_json(base_url, cli_json, values):
    api = {("tied" if k == "untied" else k): ("untied" if k == "untied" else v) for k, v in values.items()}
    status, answer = get(base_url + "api/family?" + _query(api))
    assert status == 200, answer
    expected = cli_json(_plan_argv(values))
    assert answer["plan"] == expected
    assert answer["commands"]["plan"].startswith("depthwidth plan ")
    assert cli_json(argv_of_command(answer["commands"]["plan"])) == expected  # the line shown is the same family
    members = expected["members"]
    assert [r["label"] for r in answer["view"]["rows"]] == [m["derived"]["label"] for m in members]
    for member, detail in zip(members, answer["details"]):
        assert cli_json(argv_of_command(detail["command"])) == detail["calc"]
        # with dp 1 and ZeRO 0 the detail is the member's own record, less what only plan adds
        plain = {k: v for k, v in member.items() if k not in ("latency", "lint", "plan", "preset")}
        assert {k: v for k, v in detail["calc"].items() if k != "preset"} == plain
        assert detail["calc"]["preset"] == (None if "like" not in values else cli_json(
            ["calc", "--preset", values["like"], "--json"])["preset"])


def test_the_table_has_exact_counts_and_the_verdicts_follow_the_limits(base_url, cli_json):
    status, answer = get(base_url + "api/family?params=124M&count=7&max_decode_ms=1.5&max_memory_gb=3")
    assert status == 200
    members = cli_json(["plan", "--params", "124M", "--count", "7", "--json"])["members"]
    view = answer["view"]
    keys = [c["key"] for c in view["columns"]]
    for member, row, verdict in zip(members, view["rows"], view["verdicts"]):
        cells = dict(zip(keys, row["cells"]))
        assert cells["params.total"]["value"] == member["params"]["total"]
        assert cells["params.total"]["text"] == f"{member['params']['total']:,}"
        assert cells["shape.n_layers"]["text"] == str(member["shape"]["n_layers"])
        assert cells["latency.decode_ms"]["value"] == member["latency"]["decode_ms"]
        memory = member["memory"]["total_training_bytes"]
        assert cells["detail:memory.total_training_bytes"]["value"] == memory
        meets = member["latency"]["decode_ms"] <= 1.5 and memory <= 3e9
        assert verdict["meets"] is meets and cells["limits"]["value"] is meets
        assert all(("decode" in r and "> 1.5 ms" in r) or ("memory" in r and "> 3 GB" in r) for r in verdict["reasons"])
    assert {v["meets"] for v in view["verdicts"]} == {True, False}  # the limits split this family
    assert view["axes"]["decode_ms"]["values"] == [m["latency"]["decode_ms"] for m in members]
    assert view["depths"] == [m["shape"]["n_layers"] for m in members]


def test_zero_and_dp_change_each_members_memory_as_calc_does(base_url, cli_json):
    status, answer = get(base_url + "api/family?params=1.3B&count=3&dp=8&zero=3&max_memory_gb=6")
    assert status == 200
    for member, detail, verdict in zip(answer["plan"]["members"], answer["details"], answer["view"]["verdicts"]):
        assert "--zero 3" in detail["command"] and "--dp 8" in detail["command"]
        sharded = detail["calc"]["memory"]["total_training_bytes"]
        assert sharded < member["memory"]["total_training_bytes"] / 2  # ZeRO-3 over 8 shards the model states
        assert cli_json(argv_of_command(detail["command"])) == detail["calc"]
        assert verdict["meets"] is (sharded <= 6e9)


def test_two_pinned_members_side_by_side(base_url):
    status, answer = get(base_url + "api/family?params=124M&count=7")
    a, b = answer["view"]["rows"][0]["label"], answer["view"]["rows"][3]["label"]
    status, answer = get(base_url + f"api/family?params=124M&count=7&pins={a},{b}")
    pair = answer["pair"]
    assert status == 200 and (pair["a"], pair["b"]) == (a, b)
    rows = {r["label"]: r for r in pair["rows"]}
    ma, mb = answer["plan"]["members"][0], answer["plan"]["members"][3]
    assert rows["decode ms / token"]["ratio"] == mb["latency"]["decode_ms"] / ma["latency"]["decode_ms"]
    assert rows["layers"]["a"] == str(ma["shape"]["n_layers"]) and rows["layers"]["ratio_text"].endswith("x")
    assert get(base_url + f"api/family?params=124M&count=7&pins={a}")[1]["pair"] is None


@pytest.mark.parametrize("query, argv", [
    ("params=12Q", ["plan", "--params", "12Q"]),
    ("params=124M&seq_len=4096", ["plan", "--params", "124M", "--seq-len", "4096"]),
    ("params=124M&flops=1e19", ["plan", "--params", "124M", "--flops", "1e19"]),
    ("params=-5M", ["plan", "--params", "-5M"]),
    ("params=124M&ffn=geglu", ["plan", "--params", "124M", "--ffn", "geglu"]),
    ("params=124M&zero=7", ["calc", "--zero", "7"]),
    ("params=124M&max_decode_ms=0", ["explore", "--max-decode-ms", "0"]),
])
def test_a_bad_value_is_a_400_with_the_command_lines_message(base_url, cli_error, query, argv):
    status, answer = get(base_url + "api/family?" + query)
    assert status == 400
    assert answer["error"] == cli_error(argv)
    assert answer["field"] is not None and answer["errors"][answer["field"]] == answer["error"]
    assert "Traceback" not in answer["error"] and "\n" not in answer["error"]
    status, page = get(base_url + "page/family?" + query)  # the page's own endpoint: the same line, as a verdict
    assert status == 200 and page == {"ok": False, **answer}


def test_every_bad_field_gets_its_own_message(base_url, cli_error):
    status, answer = get(base_url + "api/family?params=12Q&count=0&max_memory_gb=abc")
    assert status == 400 and set(answer["errors"]) == {"params", "count", "max_memory_gb"}
    assert answer["errors"]["count"] == cli_error(["plan", "--count", "0"])
    assert answer["errors"]["max_memory_gb"] == cli_error(["explore", "--max-memory-gb", "abc"])


@pytest.mark.parametrize("path, method, headers, status, words", [
    ("api/family?bogus=1", "GET", {}, 400, "unknown field 'bogus'"),
    ("api/family?params=1M&params=2M", "GET", {}, 400, "params: given twice"),
    ("api/family?params=%ff", "GET", {}, 400, "not UTF-8"),
    ("api/family?params=" + "1" * 1200, "GET", {}, 400, "more than 1,000"),
    ("api/family?" + "&".join(f"k{i}=1" for i in range(1500)), "GET", {}, 414, "too long"),
    ("api/family?" + "&".join(f"k{i}=1" for i in range(100)), "GET", {}, 400, "more than 80 keys"),
    ("api/family?params=1M", "POST", {}, 405, "answers GET only"),
    ("api/nothing", "GET", {}, 404, "no such page"),
    ("api/study?study=9&params=1M", "GET", {}, 400, "expected the index of a study"),
    ("api/options", "GET", {"Host": "attacker.example:80"}, 403, "not this machine's loopback"),
])
def test_a_malformed_request_is_answered_in_one_line(base_url, path, method, headers, status, words):
    code, answer = get(base_url + path, method=method, headers=headers)
    assert code == status and words in answer["error"], answer


def test_a_defect_is_a_500_logged_with_its_traceback_and_the_server_goes_on(capfd):
    from depthwidth.cli.explore import CliCommands
    from depthwidth.explore import Explorer

    from explore_helpers import serve

    class Broken(CliCommands):
        def run(self, command, argv, *, study=None):
            if command == "plan":
                raise ZeroDivisionError("a defect")
            return super().run(command, argv, study=study)

    server, url = serve(Explorer(Broken()))
    try:
        status, answer = get(url + "api/family?params=124M")
        assert status == 500 and answer == {
            "error": "internal error (ZeroDivisionError); the traceback is in the server's log"}
        status, page = get(url + "page/family?params=124M")
        assert status == 500
        err = capfd.readouterr().err
        assert "Traceback" in err and "ZeroDivisionError: a defect" in err and "/api/family?params=124M" in err
        assert get(url + "api/options")[0] == 200
        assert get(url + "api/family?params=12Q")[0] == 400
    finally:
        server.shutdown()
        server.server_close()


def test_the_fields_are_exactly_the_flags_of_plan(explorer):
    from depthwidth.cli.explore import CliCommands
    from depthwidth.explore.fields import FIELDS
    from depthwidth.shapes.shape import FFN_KINDS

    plan = CliCommands()._parsers["plan"]
    flags = {a.option_strings[0] for a in plan._actions if a.option_strings} - {"-h", "--json", "--plot", "--untied"}
    assert {f.flag for f in FIELDS if f.command == "plan"} == flags
    options = explorer.options()
    by_name = {f["name"]: f for f in options["fields"]}
    assert by_name["ffn"]["choices"] == list(FFN_KINDS) and by_name["hardware"]["default"] == "h100"
    assert by_name["zero"]["choices"] == ["0", "1", "2", "3"] and by_name["bootstrap"]["default"] == "20"
    assert options["studies"] == [{"index": 0, "name": "fixture", "folder": explorer.studies[0].folder, "shapes": 8}]


def test_a_study_panel_is_recommend_json_and_its_points_are_the_studys(base_url, cli_json, explore_study):
    from depthwidth.report.data import load_study

    query = "study=0&params=50M&hardware=h100&max_decode_ms=0.3&bootstrap=0&splits=2"
    status, answer = get(base_url + "api/study?" + query)
    assert status == 200, answer
    study = load_study(explore_study)
    assert [p["key"] for p in answer["points"]] == [r.key for r in study.results]
    for p, r in zip(answer["points"], study.results):
        assert (p["n_layers"], p["loss"], p["loss_std"], p["seed_losses"]) == (
            r.n_layers, r.val_loss, r.val_loss_std, list(r.seed_losses))
        assert p["values"]["decode_ms"] == r.measured_decode_ms and p["values"]["loss"] == r.val_loss
    rec_line = answer["commands"]["recommend"]
    assert "--hardware h100-sxm --max-decode-ms 0.3 --memory training" in rec_line
    assert cli_json(argv_of_command(rec_line)) == answer["recommendation"]
    assert answer["recommendation"]["chosen"] is not None
    pres_line = answer["commands"]["prescribe"]
    assert "--target-params 50M --bootstrap 0 --splits 2" in pres_line
    assert cli_json(argv_of_command(pres_line)) == answer["prescription"]
    law = answer["law_points"]
    assert len(law) == len(answer["prescription"]["prescription"]["candidates"]) > 3
    assert sum(p["chosen"] for p in law) == 1
    # a FLOPs budget has no prescription, said in one line; the recommendation stays
    status, flops = get(base_url + "api/study?study=0&flops=1e19&tokens_per_param=20&max_decode_ms=0.3")
    assert status == 200 and flops["prescription"] is None and "parameter budget" in flops["prescription_note"]
    assert flops["recommendation"] == cli_json(argv_of_command(flops["commands"]["recommend"]))


def test_the_page_and_its_files_are_served(base_url):
    import urllib.request

    from depthwidth.explore.server import STATIC

    for path in STATIC:
        with urllib.request.urlopen(base_url.rstrip("/") + path) as reply:
            body = reply.read().decode()
            assert reply.status == 200 and "default-src 'none'" in reply.headers["Content-Security-Policy"]
            body = body.replace('"http://www.w3.org/2000/svg"', "")  # a namespace name, not an address
            assert "http://" not in body and "https://" not in body  # offline: nothing from another origin
    with urllib.request.urlopen(base_url) as reply:
        page = reply.read().decode()
    assert all(f'src="{name}"' in page for name in ("chart.js", "panels.js", "explore.js"))
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["package-data"]["depthwidth.explore"] == ["static/*"]  # in the wheel


def test_a_query_keeps_its_answer_apart_from_anothers(explorer):
    """The cache gives each input its own answer."""
    a = explorer.family("params=124M&count=3")
    b = explorer.family("params=350M&count=3")
    assert a["plan"]["family"]["target"] == 124e6 and b["plan"]["family"]["target"] == 350e6
    again = copy.deepcopy(explorer.family("params=124M&count=3"))
    assert again == a


DEMO = Path(os.environ.get("DEPTHWIDTH_DEMO_STUDY") or Path(__file__).resolve().parents[2] / "demo-study")


@pytest.mark.skipif(not (DEMO / "study.sqlite").is_file(),
                    reason=f"no study at {DEMO} (`make demo` writes demo-study/)")
def test_the_demo_study_shows_its_points(cli_json):
    """`depthwidth explore demo-study`: every full-horizon shape of `make demo`'s study is a point, with its
    loss, seeds and measured latency, and the recommendation is `recommend --json`'s."""
    from depthwidth.cli.explore import CliCommands
    from depthwidth.explore import Explorer, StudySource
    from depthwidth.report.data import load_study
    from depthwidth.study.horizons import split_horizon

    explorer = Explorer(CliCommands(), studies=[StudySource(folder=str(DEMO))])
    answer = explorer.study("study=0&flops=1e19&tokens_per_param=20&max_decode_ms=1")
    full = [r for r in load_study(DEMO).results if split_horizon(r.group) is None]
    assert [p["key"] for p in answer["points"]] == [r.key for r in full] and len(full) >= 10
    assert all(p["values"]["loss"] == r.val_loss and p["seed_losses"] == list(r.seed_losses)
               for p, r in zip(answer["points"], full))
    assert sum("decode_ms" in p["values"] for p in answer["points"]) == sum(
        r.measured_decode_ms is not None for r in full) > 0
    assert answer["recommendation"] == cli_json(argv_of_command(answer["commands"]["recommend"]))
