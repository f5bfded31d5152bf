"""Shared fixtures: the synthetic fixture study (written with the study store's own API) and its report,
built once per test session."""

import pytest

from fixture_study import build_fixture_study


@pytest.fixture(scope="session")
def fixture_study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    losses = build_fixture_study(folder)
    return folder, losses


@pytest.fixture(scope="session")
def written_report(fixture_study, tmp_path_factory):
    from depthwidth.report.build import build_report
    from depthwidth.report.data import load_study
    from depthwidth.report.export import write_report

    folder, _ = fixture_study
    report = build_report(load_study(folder), n_bootstrap=10)
    files = write_report(report, tmp_path_factory.mktemp("report"))
    return report, files
