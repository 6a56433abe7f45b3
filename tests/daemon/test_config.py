from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragd.daemon.errors import ConfigError
from ragd.daemon.settings.codegroups import CodeConfig
from ragd.daemon.settings.concepts import ConceptsConfig
from ragd.daemon.settings.config import (
    Config,
    ExtractConfig,
    HttpConfig,
    PowerConfig,
    config_keys,
    config_reference_markdown,
    load_config,
    render_default_config,
)
from ragd.daemon.settings.paths import Paths, resolve_paths


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return resolve_paths(env={"RAGD_HOME": str(tmp_path)})


def _write(paths: Paths, text: str) -> None:
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(text, encoding="utf-8")


def test_defaults_without_a_file(paths: Paths) -> None:
    config = load_config(paths, env={}, write_default=False)

    assert config == Config()
    assert not paths.config_file.exists()
    assert config.embedding.model == "all-MiniLM-L6-v2"
    assert config.embedding.batch_size == 16
    assert config.search.rrf_k == 60
    assert config.search.overfetch == 50
    assert config.index.exclude == [".obsidian", ".trash", ".git", "node_modules"]
    assert config.obsidian.vaults == []
    assert config.mcp.toolsets == ["search", "index", "notes"]


def test_default_file_is_written_once_parseable_and_never_overwritten(paths: Paths) -> None:
    load_config(paths, env={})

    text = paths.config_file.read_text(encoding="utf-8")
    assert Config.model_validate(tomllib.loads(text)) == Config()
    for key in config_keys():
        # every key appears as a live line, preceded by its description as a comment
        assert f"\n{key.name} = " in text
        assert key.description.split()[0] in text

    edited = text.replace("rrf_k = 60", "rrf_k = 15")
    paths.config_file.write_text(edited, encoding="utf-8")
    config = load_config(paths, env={})

    assert config.search.rrf_k == 15
    assert paths.config_file.read_text(encoding="utf-8") == edited


def test_default_file_lines_carry_the_description(paths: Paths) -> None:
    lines = render_default_config().splitlines()

    line = lines.index("batch_size = 16")
    assert lines[line - 1] == "# Texts embedded per batch (1 to 512)"
    assert "[embedding]" in lines


def test_unwritable_config_dir_falls_back_to_defaults(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "blocker").write_text("a file where a directory should be", encoding="utf-8")
    paths = Paths(tmp_path / "blocker" / "config", tmp_path, tmp_path, tmp_path)

    config = load_config(paths, env={})

    assert config == Config()
    assert "could not write the default configuration" in caplog.text


def test_each_layer_wins_over_the_ones_below(paths: Paths) -> None:
    _write(
        paths,
        "[search]\nrrf_k = 10\noverfetch = 20\nmax_per_source = 3\n",
    )
    env = {"RAGD_SEARCH_OVERFETCH": "30", "RAGD_SEARCH_MAX_PER_SOURCE": "4"}
    overrides = {"search.max_per_source": 5}

    config = load_config(paths, overrides=overrides, env=env)

    assert config.search.keyword_weight == 1.0  # default: nobody set it
    assert config.search.rrf_k == 10  # file beats default
    assert config.search.overfetch == 30  # env beats file
    assert config.search.max_per_source == 5  # override beats env and file


def test_env_values_are_coerced(paths: Paths) -> None:
    env = {
        "RAGD_EMBEDDING_MODEL": "/models/my-model",
        "RAGD_EMBEDDING_BATCH_SIZE": "64",
        "RAGD_OBSIDIAN_ENABLED": "false",
        "RAGD_INDEX_MAX_FILE_MB": "2.5",
    }

    config = load_config(paths, env=env, write_default=False)

    assert config.embedding.model == "/models/my-model"
    assert config.embedding.batch_size == 64
    assert config.obsidian.enabled is False
    assert config.index.max_file_mb == 2.5


def test_list_env_values(paths: Paths, tmp_path: Path) -> None:
    vault_a, vault_b = tmp_path / "notes, personal", tmp_path / "work"
    env = {
        # a comma is legal in a folder name, so vaults split on the path separator
        "RAGD_OBSIDIAN_VAULTS": f"{vault_a}{os.pathsep}{vault_b}{os.pathsep}",
        "RAGD_INDEX_EXCLUDE": " .git, build ,,dist",
        "RAGD_MCP_TOOLSETS": "search",
    }

    config = load_config(paths, env=env, write_default=False)

    assert config.obsidian.vaults == [str(vault_a), str(vault_b)]
    assert config.index.exclude == [".git", "build", "dist"]
    assert config.mcp.toolsets == ["search"]


def test_empty_env_value_counts_as_unset(paths: Paths) -> None:
    _write(paths, "[search]\nrrf_k = 10\n")

    config = load_config(paths, env={"RAGD_SEARCH_RRF_K": "", "RAGD_INDEX_EXCLUDE": " "})

    assert config.search.rrf_k == 10
    assert config.index.exclude == Config().index.exclude


def test_none_overrides_are_ignored(paths: Paths) -> None:
    config = load_config(paths, overrides={"search.rrf_k": None, "search.overfetch": "70"}, env={})

    assert config.search.rrf_k == 60
    assert config.search.overfetch == 70


def test_bad_toml_names_the_file_and_the_line(paths: Paths) -> None:
    _write(paths, "[search]\nrrf_k = = 3\n")

    with pytest.raises(ConfigError) as info:
        load_config(paths, env={})

    assert str(paths.config_file) in info.value.message
    assert "invalid TOML" in info.value.message
    assert "line 2" in info.value.message
    assert info.value.hint


def test_bad_value_in_file_names_file_key_and_problem(paths: Paths) -> None:
    _write(paths, '[search]\nrrf_k = "lots"\n')

    with pytest.raises(ConfigError) as info:
        load_config(paths, env={})

    message = info.value.message
    assert str(paths.config_file) in message
    assert "search.rrf_k" in message
    assert "valid integer" in message
    assert "'lots'" in message
    assert "search.rrf_k" in info.value.hint
    assert str(paths.config_file) in info.value.hint


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[embedding]\nbatch_size = 0\n", "embedding.batch_size"),
        ("[embedding]\nbatch_size = 513\n", "embedding.batch_size"),
        ("[search]\noverfetch = 9\n", "search.overfetch"),
        ("[search]\nmax_per_source = 0\n", "search.max_per_source"),
        ('[obsidian]\nvaults = "/one/vault"\n', "obsidian.vaults"),
        ("[index]\nexclude = [1, 2]\n", "index.exclude[0]"),
    ],
)
def test_out_of_range_values_are_rejected(paths: Paths, text: str, key: str) -> None:
    _write(paths, text)

    with pytest.raises(ConfigError) as info:
        load_config(paths, env={})

    assert f"{paths.config_file}: {key}:" in info.value.message


def test_typo_in_a_key_is_an_error_with_a_suggestion(paths: Paths) -> None:
    _write(paths, "[search]\nrrf_kk = 30\n")

    with pytest.raises(ConfigError) as info:
        load_config(paths, env={})

    assert "search.rrf_kk: unknown key" in info.value.message
    assert "rename it to search.rrf_k" in info.value.hint


def test_typo_in_a_section_is_an_error(paths: Paths) -> None:
    _write(paths, "[serch]\nrrf_k = 30\n")

    with pytest.raises(ConfigError) as info:
        load_config(paths, env={})

    assert "serch: unknown section" in info.value.message
    assert "rename it to search" in info.value.hint


def test_section_given_as_a_value_is_an_error(paths: Paths) -> None:
    _write(paths, "search = 3\n")

    with pytest.raises(ConfigError) as info:
        load_config(paths, env={})

    assert "[search] table" in info.value.message


def test_bad_env_value_names_the_variable(paths: Paths) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(paths, env={"RAGD_SEARCH_RRF_K": "sixty"}, write_default=False)

    assert "environment variable RAGD_SEARCH_RRF_K: search.rrf_k:" in info.value.message
    assert "RAGD_SEARCH_RRF_K" in info.value.hint


def test_bad_override_names_the_key(paths: Paths) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(paths, overrides={"embedding.batch_size": 9999}, env={}, write_default=False)

    assert "embedding.batch_size" in info.value.message
    assert "less than or equal to 512" in info.value.message


def test_unknown_override_is_an_error(paths: Paths) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(paths, overrides={"search.rrfk": 3}, env={}, write_default=False)

    assert "search.rrfk" in info.value.message
    assert "search.rrf_k" in info.value.hint


def test_all_problems_are_reported_at_once(paths: Paths) -> None:
    _write(paths, "[search]\nrrf_k = 0\noverfetch = 1\n")

    with pytest.raises(ConfigError) as info:
        load_config(paths, env={})

    assert "search.rrf_k" in info.value.message
    assert "search.overfetch" in info.value.message


def test_config_is_frozen() -> None:
    config = Config()

    with pytest.raises(ValidationError):
        config.search.rrf_k = 5  # type: ignore[misc]


def test_reference_markdown_lists_every_key() -> None:
    markdown = config_reference_markdown()
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]

    keys = config_keys()
    assert len(rows) == len(keys) == 51 + len(CodeConfig.model_fields) + len(
        ConceptsConfig.model_fields) + len(PowerConfig.model_fields) + len(
        ExtractConfig.model_fields) + len(HttpConfig.model_fields)
    for key, row in zip(keys, rows, strict=True):
        assert row.startswith(f"| `{key.dotted}` |")
        assert f"`{key.env_var}`" in row
        assert key.description in row
    assert "| `search.rrf_k` | `60` | `RAGD_SEARCH_RRF_K` |" in markdown
    assert '| `embedding.model` | `"all-MiniLM-L6-v2"` | `RAGD_EMBEDDING_MODEL` |' in markdown


def test_default_file_offers_the_thunderbird_folders_found(tmp_path: Path) -> None:
    from ragd.daemon.settings.config import render_default_config

    text = render_default_config(["/home/a/.thunderbird/x.default/Mail/Local Folders"])
    section = text.split("[email]", 1)[1].split("\n[", 1)[0]
    assert "paths = []" in section  # nothing is indexed unasked
    assert '# paths = ["/home/a/.thunderbird/x.default/Mail/Local Folders"]' in section
    assert tomllib.loads(text)["email"]["paths"] == []
    assert "Found on this machine" not in render_default_config()
