"""The cache folder and the profile files: the names earlier versions wrote keep working."""

import os

from depthwidth.machine import cache_dir, profile_candidates, profile_path


def test_cache_folder_follows_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path and cache_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("DEPTHWIDTH_CACHE")
    assert cache_dir().parts[-2:] == (".cache", "depthwidth")


def test_profile_files_per_thread_count(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    monkeypatch.delenv("DEPTHWIDTH_HW_PROFILE", raising=False)
    cores = os.cpu_count()
    assert profile_path() == profile_path(threads=cores) == tmp_path / "hw-profile.json"
    assert profile_path(threads=cores + 1) == tmp_path / f"hw-profile-{cores + 1}threads.json"
    assert profile_path(threads=3, cache=tmp_path / "c") == tmp_path / "c" / "hw-profile-3threads.json"
    assert profile_candidates(threads=cores + 1) == (tmp_path / f"hw-profile-{cores + 1}threads.json",
                                                      tmp_path / "hw-profile.json")
    assert profile_candidates(threads=cores) == (tmp_path / "hw-profile.json",)
    for n in (1, 4):
        (tmp_path / f"hw-profile-{n}threads.json").write_text("{}")
    (tmp_path / "hw-profile-xthreads.json").write_text("{}")
    assert profile_candidates() == (tmp_path / "hw-profile.json", tmp_path / "hw-profile-4threads.json",
                                    tmp_path / "hw-profile-1threads.json")


def test_the_override_names_the_one_file(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHWIDTH_HW_PROFILE", str(tmp_path / "mine.json"))
    assert profile_path(threads=1) == profile_path() == tmp_path / "mine.json"
    assert profile_candidates(threads=7) == profile_candidates() == (tmp_path / "mine.json",)
