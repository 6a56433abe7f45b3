from ragd.daemon.cli.docgen import main


def test_generated_docs_match_the_code() -> None:
    # Fails when a config key or CLI flag changed without `python -m ragd.daemon.cli.docgen`.
    assert main(["--check"]) == 0
