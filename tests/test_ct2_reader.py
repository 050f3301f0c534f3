"""`read_ct2` on small model.bin files written here with struct (CTranslate2's layout: version, spec, revision,
variables as name/shape/dtype code/bytes, aliases), so every dtype path and every refusal is exercised."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from harness.models import whisper_ct2 as w


def _string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def _variable(name: str, shape: tuple[int, ...], code: int, data: bytes) -> bytes:
    return (_string(name) + struct.pack("<B", len(shape)) + b"".join(struct.pack("<I", d) for d in shape)
            + struct.pack("<BI", code, len(data)) + data)


def _model_bin(variables: list[bytes], aliases: dict[str, str], version: int = 6) -> bytes:
    return (struct.pack("<I", version) + _string("WhisperSpec") + struct.pack("<I", 3)
            + struct.pack("<I", len(variables)) + b"".join(variables)
            + struct.pack("<I", len(aliases)) + b"".join(_string(a) + _string(t) for a, t in aliases.items()))


F32 = np.array([[0.5, -1.25, 3.0], [2.0, 0.0, -0.125]], dtype="<f4")
BF16 = np.array([0x3FC0, 0xC010, 0x0000], dtype="<u2")  # 1.5, -2.25, 0.0 as bfloat16 bit patterns
I8 = np.array([-128, 0, 127], dtype="i1")


def test_every_dtype_and_the_aliases_are_read(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(_model_bin([_variable("enc/w", (2, 3), 0, F32.tobytes()), _variable("enc/b", (3,), 5, BF16.tobytes()),
                                 _variable("q", (3,), 1, I8.tobytes())], {"dec/proj": "enc/w"}))  # fmt: skip
    ct2 = w.read_ct2(path)
    assert (ct2.spec, ct2.version, ct2.revision) == ("WhisperSpec", 6, 3)
    np.testing.assert_array_equal(ct2.variables["enc/w"], F32)
    assert ct2.variables["enc/b"].dtype == np.float32 and ct2.variables["enc/b"].tolist() == [1.5, -2.25, 0.0]
    assert ct2.variables["q"].dtype == np.int8 and ct2.variables["q"].tolist() == [-128, 0, 127]
    assert ct2.aliases == {"dec/proj": "enc/w"} and ct2.get("dec/proj") is ct2.variables["enc/w"]


@pytest.mark.parametrize(("data", "says"), [
    (_model_bin([], {}, version=4), "format version 4 is older than this reader"),
    (_model_bin([_variable("x", (1,), 9, b"\0\0\0\0")], {}), "variable 'x' has unknown dtype code 9"),
    (_model_bin([_variable("x", (2,), 0, b"\0" * 8)], {})[:-6], "truncated inside variable 'x' (needs 8 bytes"),
    (_model_bin([], {}) + b"\0\0", "2 trailing bytes after the alias table"),
    (_model_bin([], {"a": "b"})[:-3], "truncated at byte"),
])  # fmt: skip
def test_a_bad_file_is_one_error_naming_it(tmp_path: Path, data: bytes, says: str) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(data)
    with pytest.raises(w.CT2FormatError) as err:
        w.read_ct2(path)
    assert str(err.value).startswith(f"{path}: ") and says in str(err.value)
