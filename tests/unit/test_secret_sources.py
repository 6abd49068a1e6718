"""Secrets without a server: where a name is looked up, masking, shown job data, and what
`flows validate` says of credentials written in a file."""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from flows.validation.validate import validate_text
from scheduler import secrets
from scheduler.secrets import (
    EnvFileError,
    Lines,
    MissingSecret,
    Secrets,
    mask,
    masked,
    read_env_file,
    remember,
    shown_data,
)


def test_an_env_file_a_variable_and_a_file_in_that_order(tmp_path: Path) -> None:
    (tmp_path / "A").write_text("from-file\n")
    (tmp_path / "B").write_text("b-file")
    secrets = Secrets({"A": "from-env-file"}, environ={"A": "env", "B": "b-env"}, dirs=[tmp_path])
    assert secrets.resolve_all(["A", "B"]) == {"A": "from-env-file", "B": "b-env"}
    assert Secrets(environ={}, dirs=[tmp_path]).resolve("B") == "b-file"
    with pytest.raises(MissingSecret, match=r"^secret C not found: .* " + str(tmp_path)):
        secrets.resolve("C")
    assert secrets.get("../etc/passwd") is None  # a name, never a path


def test_an_env_file_not_utf8_is_said_in_words(tmp_path: Path) -> None:
    path = tmp_path / "x.env"
    path.write_bytes(b"A=1\nB=caf\xe9\n")
    with pytest.raises(EnvFileError) as refused:
        read_env_file(path)
    assert str(refused.value) == f"{path}:2: not UTF-8 text (byte 9)"


def test_an_env_file_is_read_again_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A rotated secret is used without a restart; a rotation that leaves the file unreadable
    keeps the values read last, and says why."""
    path = tmp_path / "worker.env"
    path.write_text("TOKEN=old\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    secrets = Secrets.from_env_file(path)
    secrets.environ, secrets.dirs = {}, ()
    assert secrets.resolve("TOKEN") == "old"
    path.write_text("TOKEN=new\nOTHER=2\n")
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert secrets.resolve_all(["TOKEN", "OTHER"]) == {"TOKEN": "new", "OTHER": "2"}
    path.write_text("TOKEN=newer\n9BAD\n")
    os.utime(path, ns=(3_000_000_000, 3_000_000_000))
    assert secrets.resolve("TOKEN") == "new"
    assert "worker.env:2: expected NAME=value; the values read before are kept" in caplog.text
    path.unlink()  # gone for a moment, as a rotation by rename leaves it
    assert secrets.resolve("TOKEN") == "new"


def test_env_file_lines(tmp_path: Path) -> None:
    path = tmp_path / "x.env"
    path.write_text("# c\n\nexport A='one two'\nB=\"x=y\"\nC=plain\n")
    assert read_env_file(path) == {"A": "one two", "B": "x=y", "C": "plain"}
    path.write_text("A=1\n9X=2\n")
    with pytest.raises(EnvFileError, match=r"x.env:2: expected NAME=value"):
        read_env_file(path)


def test_masking_takes_the_longest_value_first_and_leaves_tiny_ones() -> None:
    assert mask("pw=abc-secret and abc", ["abc", "abc-secret"]) == "pw=*** and ***"
    assert mask("a b", ["a"]) == "a b"


def test_a_secret_is_masked_in_the_forms_it_is_printed_in() -> None:
    value = "s3cr/et 'q\"ü-" + uuid.uuid4().hex[:6]
    remember([value])
    raw = value.encode()
    printed = [
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value)[1:-1].replace("/", "\\/"),
        repr(value)[1:-1],
    ]
    for text in printed:
        assert masked(f"<{text}>") == "<***>", text
    # Inside a longer base64 text, at each of the three offsets: only the characters that
    # also hold bits of what is around it are left.
    for before in ("", "u:", "us:", "user:"):
        for after in ("", "\n", "!?"):
            encoded = base64.b64encode(f"{before}{value}{after}".encode()).decode()
            shown = masked(encoded)
            assert "***" in shown and len(shown) <= len(encoded) - 12, (before, after, shown)


def test_a_secret_printed_as_hex_or_base64_twice_is_masked() -> None:
    """Before, hex (`xxd -p`, `.hex()`) and base64 of base64 (`base64 | base64`) of a secret
    were printed in clear."""
    value = "h3x-" + uuid.uuid4().hex[:12]
    remember([value])
    raw = value.encode()
    twice = base64.b64encode(base64.b64encode(raw)).decode()
    for text in (raw.hex(), raw.hex().upper(), twice, twice.rstrip("=")):
        assert masked(f"<{text}>") == "<***>", text
    # `printf %s "$S" | base64 | base64`: the inner text ends with a newline; what the value
    # alone decides is masked, a character that holds bits of that newline shows.
    piped = base64.b64encode(base64.b64encode(raw) + b"\n").decode()
    shown = masked(piped)
    assert shown.startswith("***") and len(shown) <= 3 + 4, shown


def test_a_short_secret_masks_no_piece_of_its_forms() -> None:
    """A value of 3 characters or more is masked as it is and in its whole forms; a piece of
    one (a line, its base64 at an offset, a part at a line break) only from 8 characters."""
    remember(["Zk9", "ab"])
    assert masked("Zk9 and " + base64.b64encode(b"Zk9").decode()) == "*** and ***"
    assert masked("ab " + base64.b64encode(b"ab").decode()) == "ab YWI="
    inside = base64.b64encode(b"user:Zk9").decode()
    assert masked(inside) == inside


def test_a_secret_split_over_lines_is_masked_from_8_characters_a_part() -> None:
    value = "Split-" + uuid.uuid4().hex[:16]  # 22 characters
    remember([value])
    assert masked(f"token: {value[:10]}") == "token: ***"
    assert masked(f"{value[10:]} and more") == "*** and more"
    assert masked(f"a\nsaid {value[:8]}\n  {value[8:15]}\n{value[15:]}!\n") == (
        f"a\nsaid ***\n  {value[8:15]}\n{value[15:]}!\n"
    )  # a part under 8 characters (7 here) shows
    assert masked(f"  {value[3:14]}  ") == "  ***  "  # a whole line of a piece of it
    assert masked(f"x {value[:7]}") == f"x {value[:7]}"


def test_a_secret_a_line_break_split_anywhere_is_masked_on_both_sides() -> None:
    """Before, a part under 8 characters at the line break showed. Now two lines that hold a
    value together are masked on both sides, however short either part; a text that is not
    the rest of it leaves the line before as it is."""
    value = "Brk-" + uuid.uuid4().hex[:14]  # 18 characters
    remember([value])
    for at in range(1, len(value)):
        text = f"token: {value[:at]}\n{value[at:]} end\n"
        assert masked(text) == "token: ***\n*** end\n", at
        lines = Lines()
        shown = lines.add(f"token: {value[:at]}") + lines.add(f"{value[at:]} end")
        # Line by line, a start under MIN_HOLD (3) characters is not held: it shows.
        first = "token: ***" if at >= secrets.MIN_HOLD else f"token: {value[:at]}"
        assert shown + lines.release() == [first, "*** end"], at
    assert (
        masked(f"token: {value[:3]}\nsomething else\n") == f"token: {value[:3]}\nsomething else\n"
    )
    lines = Lines()
    assert lines.add(f"token: {value[:3]}") == []  # held: the next line may be the rest
    shown = lines.add("something else") + lines.release()
    assert shown == [f"token: {value[:3]}", "something else"]


def test_a_short_line_of_a_secret_of_several_lines_is_masked_after_the_line_before() -> None:
    last = uuid.uuid4().hex[:4]
    value = f"-----BEGIN K-----\n{uuid.uuid4().hex}\n{last}\n-----END K-----"
    body = value.splitlines()[1]
    remember([value])
    assert masked(f"{body}\n{last}\n") == "***\n***\n"
    assert masked(f"x\n{last}\n") == f"x\n{last}\n"  # alone, 4 characters are no secret
    lines = Lines()
    shown = [text for line in value.splitlines() for text in lines.add(line)]
    assert shown + lines.release() == ["***"] * 4


def test_a_long_form_split_at_a_short_part_is_masked_and_indexed_at_its_ends_only() -> None:
    """Before, every point of every form up to 4096 characters was indexed (a PEM key made
    each line's check go through hundreds of them, and remembering one took a fifth of a
    second, the whole index copied under the lock), and a longer form split at a part under 8
    characters showed it. Now only the breaks that leave a part under 8 are indexed, 14 at
    most a form, whatever its length."""
    value = "Long-" + uuid.uuid4().hex * 80  # 2565 characters: its hex has 5130
    remember([value])
    hexed = value.encode().hex()
    for at in (3, len(hexed) - 3):
        assert masked(f"{hexed[:at]}\n{hexed[at:]} end\n") == "***\n*** end\n", at
        lines = Lines()
        shown = lines.add(f"x {hexed[:at]}") + lines.add(f"{hexed[at:]} end") + lines.release()
        assert shown == ["x ***", "*** end"], at
    other = "Long-" + uuid.uuid4().hex * 80

    def breaks() -> int:
        return sum(map(len, secrets._rests.values())) + sum(map(len, secrets._heads.values()))

    before = breaks()
    remember([other])
    assert 0 < breaks() - before <= 14 * len(secrets.forms(other))


def test_a_line_ending_in_cr_lf_is_joined_with_the_next_and_keeps_its_cr() -> None:
    """A step that writes "\\r\\n" line ends: before, the "\\r" left at the end of each line
    hid the start of a secret split there, which showed (`token: hunte | ***`)."""
    value = "Crlf-" + uuid.uuid4().hex[:14]
    remember([value])
    for at in (3, 5, 12):
        lines = Lines()
        shown = lines.add(f"token: {value[:at]}\r") + lines.add(f"{value[at:]} end\r")
        assert shown + lines.release() == ["token: ***\r", "*** end\r"], at
    lines = Lines()
    assert lines.add("plain\r") + lines.add("text\r") == ["plain\r", "text\r"]


def test_a_line_held_back_is_joined_with_a_cut_line_after_it() -> None:
    """Before, a line held back went unjoined when the next line was cut (too long): the
    start of a secret at its end showed."""
    value = "Cut-" + uuid.uuid4().hex[:14]
    remember([value])
    lines = Lines()
    assert lines.add(f"token: {value[:5]}") == []
    shown = lines.add_cut(f"{value[5:]} " + "x" * 40 + value[:6])
    assert shown == ["token: ***", "*** " + "x" * 40 + "***"]


def test_a_line_is_held_back_for_a_start_of_3_characters_or_more() -> None:
    """Before, a secret starting with "s" held back every line ending in "s" (until the next
    line, up to 1.2 s): a start of 1 or 2 characters ends ordinary lines all the time."""
    value = "sk-" + uuid.uuid4().hex[:16]
    remember([value])
    for ordinary in ("loaded rows", "3 files in docs/sk"):
        lines = Lines()
        assert lines.add(ordinary) == [ordinary], ordinary
    lines = Lines()
    assert lines.add("key: sk-") == []
    assert lines.add(f"{value[3:]}") == ["key: ***", "***"]


def test_a_masked_value_keeps_its_keys_that_are_not_text() -> None:
    """Before, once a secret was known, every key was made its ``str()``: a result's ``None``
    key was stored as ``"None"`` (JSON writes ``"null"``) and a ``bytes`` key, which a result
    may not have, passed as ``"b'k'"``: results are checked after masking."""
    value = "Keys-" + uuid.uuid4().hex
    remember([value])
    masked_keys = secrets.masked_value({None: 0, 1: [{True: 1}], b"k": 2, value: value})
    assert masked_keys == {None: 0, 1: [{True: 1}], b"k": 2, "***": "***"}


def test_shown_data_hides_env_values_named_like_credentials() -> None:
    data = {"command": "x", "env": {"DB_PASSWORD": "p", "API_TOKEN": "t", "REGION": "eu"}}
    assert shown_data(data)["env"] == {"DB_PASSWORD": "***", "API_TOKEN": "***", "REGION": "eu"}
    assert shown_data({"env": {"REGION": "eu"}}) == {"env": {"REGION": "eu"}}


FLOW = """\
version: 1
name: f
secrets: [DB_PASSWORD]
params: {{p: {{type: string, default: x}}}}
steps:
  a:
    run: echo
    env: {env}
"""


@pytest.mark.parametrize(
    ("env", "warned"),
    [
        ("{DB_PASSWORD: hunter22}", True),
        ("{SERVICE_TOKEN: abcd1234}", True),
        ("{GH: ghp_abcdefghijklmnopqrstuvwxyz0123456789}", True),
        ("{REGION: eu-west-1}", False),
        ('{API_TOKEN: "$VAULT_TOKEN"}', False),
        ('{API_TOKEN: "${{ params.p }}"}', False),
    ],
)
def test_validate_warns_on_a_literal_credential_in_env(env: str, warned: bool) -> None:
    result = validate_text(FLOW.format(env=env), file="f.yaml")
    codes = [f.code for f in result.findings]
    assert ("literal-credential" in codes) is warned
    assert result.flow is not None  # a warning: the file stays usable


def test_the_env_file_of_the_environment_is_checked_when_the_process_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scheduler import secrets

    (tmp_path / "w.env").write_text("ONE=1\n")
    monkeypatch.setenv("FLOWS_ENV_FILE", str(tmp_path / "w.env"))
    secrets.use_env_file(None)
    assert secrets.store().get("ONE") == "1"
    (tmp_path / "w.env").write_text("not an assignment\n")
    with pytest.raises(EnvFileError, match=r"w\.env:1"):
        secrets.use_env_file(None)
    monkeypatch.setenv("FLOWS_ENV_FILE", "")
    secrets.use_env_file(None)


def test_a_missing_secret_names_the_places_looked_in(tmp_path: Path) -> None:
    """The env file by its path, and only when there is one: a worker given none was not
    looking in one."""
    path = tmp_path / "worker.env"
    path.write_text("A=1\n")
    given = Secrets.from_env_file(path)
    given.environ, given.dirs = {}, (tmp_path / "s", Path("/run/secrets"))
    with pytest.raises(MissingSecret) as missing:
        given.resolve("DB_PASSWORD")
    assert str(missing.value) == (
        f"secret DB_PASSWORD not found: not in the env file {path}, the environment, "
        f"{tmp_path / 's'} or /run/secrets"
    )
    with pytest.raises(MissingSecret) as missing:
        Secrets(environ={}, dirs=[Path("/run/secrets")]).resolve("DB_PASSWORD")
    assert str(missing.value) == (
        "secret DB_PASSWORD not found: not in the environment or /run/secrets"
    )
    with pytest.raises(MissingSecret) as missing:
        Secrets(environ={}, dirs=[]).resolve("DB_PASSWORD")
    assert str(missing.value) == "secret DB_PASSWORD not found: not in the environment"


def test_the_count_of_values_remembered_grows_with_each_new_one_only() -> None:
    """What a flow test played ahead of time is masked alike while the count is the same."""
    value = "Counted-" + uuid.uuid4().hex
    before = secrets.remembered()
    remember([value])
    assert secrets.remembered() == before + 1
    remember([value])
    assert secrets.remembered() == before + 1
