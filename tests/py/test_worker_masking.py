"""worker/masking.py: the streaming masker of delivered secret values (SPEC §14.5).

Property tests: random outputs with the values planted at random places, cut
into random chunks; the streamed result must equal masking the whole output at
once, must equal a naive whole-string reference (every byte of every occurrence
covered, each maximal covered run one marker), and must never contain a value.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.worker.masking import MASK, Masker, mask_all


def reference(data: bytes, values: list[bytes]) -> bytes:
    """Naive: mark every byte of every occurrence, then one MASK per covered run."""
    covered = [False] * len(data)
    for value in values:
        if not value:
            continue
        for start in range(len(data) - len(value) + 1):
            if data[start : start + len(value)] == value:
                for at in range(start, start + len(value)):
                    covered[at] = True
    out = bytearray()
    for at, byte in enumerate(data):
        if not covered[at]:
            out.append(byte)
        elif at == 0 or not covered[at - 1]:
            out += MASK
    return bytes(out)


def streamed(data: bytes, values: list[bytes], cuts: list[int]) -> tuple[bytes, int]:
    """Masked through the streaming masker, cut at ``cuts``; also the most it held."""
    masker = Masker(values)
    out, held, prev = bytearray(), 0, 0
    for cut in [*sorted(set(cuts)), len(data)]:
        out += masker.feed(data[prev:cut])
        held = max(held, masker.held)
        prev = cut
    out += masker.flush()
    return bytes(out), held


# Values from bytes that never occur in the marker, so that a value cannot be
# re-formed from the marker and its neighbours; a small alphabet makes overlaps,
# nesting and repetitions common.
VALUE_BYTES = b"abcxyz\xc3\xa9\x00\n"
FILLER_BYTES = VALUE_BYTES + MASK + b" 01"

value_st = st.binary(min_size=1, max_size=12).map(
    lambda raw: bytes(VALUE_BYTES[b % len(VALUE_BYTES)] for b in raw)
)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[bytes], bytes, list[int]]:
    values = draw(st.lists(value_st, min_size=1, max_size=4))
    pieces: list[bytes] = []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            pieces.append(draw(st.sampled_from(values)))
        else:
            raw = draw(st.binary(max_size=10))
            pieces.append(bytes(FILLER_BYTES[b % len(FILLER_BYTES)] for b in raw))
    data = b"".join(pieces)
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=len(data) + 1))
    return values, data, cuts


@settings(max_examples=600, deadline=None)
@given(scenario())
def test_streaming_equals_whole_equals_reference_and_leaks_nothing(
    case: tuple[list[bytes], bytes, list[int]],
) -> None:
    values, data, cuts = case
    out, held = streamed(data, values, cuts)
    assert out == mask_all(data, values)
    assert out == reference(data, values)
    for value in values:
        assert value not in out
    assert held <= max(len(v) for v in values) - 1


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_byte_by_byte_equals_whole(case: tuple[list[bytes], bytes, list[int]]) -> None:
    values, data, _ = case
    out, _ = streamed(data, values, list(range(len(data))))
    assert out == reference(data, values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=3), st.binary(max_size=60),
       st.lists(st.integers(0, 60)))  # fmt: skip
def test_differential_on_arbitrary_bytes(values: list[bytes], data: bytes, cuts: list[int]) -> None:
    """Any bytes (marker bytes included): stream == whole == reference."""
    cuts = [c for c in cuts if c <= len(data)]
    out, _ = streamed(data, values, cuts)
    assert out == reference(data, values)


def test_a_value_split_across_many_chunks_is_masked() -> None:
    secret = "s3cr3t-válue-42"
    data = f"before {secret} after\n".encode()
    out, held = streamed(data, [secret.encode()], list(range(len(data))))
    assert out == b"before [MASKED] after\n"
    assert held == len(secret.encode()) - 1


def test_nested_and_overlapping_values_mask_the_longer() -> None:
    inner, outer = b"token-12", b"xx-token-12-yy"
    assert mask_all(b"a xx-token-12-yy b token-12 c", [inner, outer]) == (
        b"a [MASKED] b [MASKED] c"
    )
    # Overlapping occurrences (neither inside the other) leave no byte of either.
    assert mask_all(b"<abcdefgh12345>", [b"abcdefgh", b"fgh12345"]) == b"<[MASKED]>"
    # Overlapping occurrences of one value.
    assert mask_all(b"-aaaaaaaaaa-", [b"aaaaaaaa"]) == b"-[MASKED]-"


def test_a_prefix_only_is_released_at_the_end() -> None:
    masker = Masker([b"abcdefgh"])
    assert masker.feed(b"xx abcdefg") == b"xx "
    assert masker.held == 7
    assert masker.flush() == b"abcdefg"


def test_output_that_cannot_begin_a_value_is_released_at_once() -> None:
    """A live log shows a line as soon as it is printed: only a tail that could
    still grow into a value is held back, not the longest value's length."""
    masker = Masker([b"s3cr3t-value-of-some-length", b"other-secret-value"])
    assert masker.feed(b"step 1 done\n") == b"step 1 done\n" and masker.held == 0
    assert masker.feed(b"token: s3cr") == b"token: " and masker.held == 4
    assert masker.feed(b"atch\n") == b"s3cratch\n" and masker.held == 0
    assert masker.feed(b"ot") == b"" and masker.held == 2  # could begin "other-…"
    assert masker.feed(b"her-secret-value!") == b"[MASKED]!" and masker.held == 0


def test_no_values_is_a_passthrough_that_holds_nothing() -> None:
    masker = Masker([])
    assert not masker.active
    assert masker.feed(b"abc") == b"abc" and masker.held == 0
    assert masker.flush() == b""


def test_repr_never_shows_a_value() -> None:
    masker = Masker(["hunter2-hunter2"])
    masker.feed(b"hunter2-hunt")
    assert "hunter2" not in repr(masker) and "hunter2" not in str(masker)
