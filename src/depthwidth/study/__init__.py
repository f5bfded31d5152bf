"""Studies: a fair comparison of many shapes from one spec file, resumable, stored in SQLite, run
locally or on Ray.

    spec = load_spec("examples/tiny.toml")        # validated before anything runs
    report = run_study(spec, study_dir="studies/tiny", executor="local")   # or "ray"
    with Store.open("studies/tiny") as store:      # what reports read
        summary = summarize(store)
"""

from depthwidth.study.expand import Expansion, Group, Run, expand
from depthwidth.study.fairness import FairnessReport, Finding, check_fairness
from depthwidth.study.run_config import canonical_json, config_hash
from depthwidth.study.runner import RunReport, StudyEvent, default_study_dir, is_running, prepare, run_study
from depthwidth.study.schema import SpecError
from depthwidth.study.selection import LRChoice, Trial, select_lrs
from depthwidth.study.spec import StudySpec, load_spec, parse_spec
from depthwidth.study.store import CurvePoint, ResultRecord, RunRecord, Store
from depthwidth.study.summary import CurveSeries, ShapeResult, StudySummary, summarize

__all__ = [
    "CurvePoint", "CurveSeries", "Expansion", "FairnessReport", "Finding", "Group", "LRChoice", "ResultRecord", "Run", "RunRecord",
    "RunReport", "ShapeResult", "SpecError", "Store", "StudyEvent", "StudySpec", "StudySummary", "Trial",
    "canonical_json", "check_fairness", "config_hash", "default_study_dir", "expand", "is_running", "load_spec",
    "parse_spec", "prepare", "run_study", "select_lrs", "summarize",
]
