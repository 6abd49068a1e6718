"""Template values reach a shell command as data: a real /bin/sh runs each command."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from flows.expand.shell_command import shell_command, variable_name
from flows.flowfile.job_data import number_problem
from flows.flowfile.templates import Reference

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "; touch PWNED",
    "x' ; touch PWNED ; echo '",
    'x" ; touch PWNED ; echo "',
    "a\ntouch PWNED",
    "$HOME ${HOME} *",
    "\\$(touch PWNED)\\",
    "a\nEOF\ntouch PWNED",
    "-o PWNED /etc/pass*",
]

SHELLS = [shell for shell in ("/bin/sh", "bash") if shutil.which(shell)]
"""The worker's shell, and bash: /bin/sh where it is bash evaluates more in arithmetic."""

# (command, what it prints for value v)
COMMANDS = [
    ("printf %s ${{ params.v }}", "{v}"),
    ('printf %s "${{ params.v }}"', "{v}"),
    ("printf %s '${{ params.v }}'", "{v}"),
    ("printf %s \"<${{ params.v }}>\" '[${{ params.v }}]'", "<{v}>[{v}]"),
    ("printf %s --v=${{ params.v }}", "--v={v}"),
    ("# it's a comment\nprintf %s ${{ params.v }}", "{v}"),
    ('printf %s \\"${{ params.v }}', '"{v}'),
    ("cat <<EOF\n<${{ params.v }}>\nEOF\n", "<{v}>\n"),
    ("cat <<-EOF\n\t${{ params.v }}\n\tEOF\nprintf %s ${{ params.v }}", "{v}\n{v}"),
    ("printf '%s ' $((1<<2)); printf %s ${{ params.v }}", "4 {v}"),
    # A command substitution quotes afresh, inside double quotes too.
    ('out="$(printf [%s] ${{ params.v }})"; printf %s "$out"', "[{v}]"),
    ('out="`printf [%s] ${{ params.v }}`"; printf %s "$out"', "[{v}]"),
    ('printf %s "$(printf %s "${{ params.v }}")"', "{v}"),
    ("printf %s \"$(printf '(%s)' ${{ params.v }})\"", "({v})"),
    ('printf %s "$(echo $((2*(1+1))) | tr -d 4)${{ params.v }}"', "{v}"),
    # `<<` in an arithmetic expansion is a shift: the next line is no here-document.
    ("x=$((1<<2))\nprintf %s ${{ params.v }}", "{v}"),
    # A subshell is a command of its own; so is one inside a substitution.
    ("(printf %s ${{ params.v }})", "{v}"),
    ('printf %s "$( (printf %s ${{ params.v }}) )"', "{v}"),
    ("case x in (x) printf %s ${{ params.v }};; esac", "{v}"),
    # A quoted here-document expands nothing: the variable stays as written.
    ("cat <<'EOF'\n${{ params.v }}\nEOF\n", "${{FLOWS_PARAMS_V}}\n"),
]


def run_shell(command: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(("command", "printed"), COMMANDS)
def test_a_hostile_value_is_printed_never_run(
    command: str, printed: str, value: str, tmp_path: Path
) -> None:
    text, env = shell_command(command, lambda reference: value)
    assert value not in text
    assert run_shell(text, env, tmp_path) == printed.format(v=value)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    "command",
    [
        'echo "total=$(( ${{ params.n }} * 10 ))"',
        "echo total=$(( ${{ params.n }} * 10 ))",
        'echo "total=$(printf %s $(( (${{ params.n }}) * 10 )))"',
    ],
)
def test_a_value_in_an_arithmetic_expansion_is_a_number_there(command: str, tmp_path: Path) -> None:
    """sh reads an arithmetic expansion as if in double quotes, and refuses quotes in it."""
    text, env = shell_command(command, lambda reference: "4")
    assert run_shell(text, env, tmp_path) == "total=40\n"


ARITHMETIC_HOSTILE = [
    *HOSTILE,
    "a[$(touch PWNED)]",  # bash (where /bin/sh is bash) runs a subscript's command here
    "x[`touch PWNED`]",
    "HOME",  # a name: bash reads its value as arithmetic in turn
    "1+a[$(touch PWNED)]",
]


@pytest.mark.parametrize("value", ARITHMETIC_HOSTILE)
def test_a_value_in_an_arithmetic_expansion_is_refused_unless_a_number(value: str) -> None:
    """An arithmetic expansion evaluates the text a variable expands to: in bash (/bin/sh on
    Fedora, RHEL, Arch) `a[$(cmd)]` there runs cmd. Such a variable is one of its own, which
    the worker refuses to start the command with unless it holds an integer."""
    text, env = shell_command("echo $(( ${{ params.n }} * 10 ))", lambda reference: value)
    assert text == "echo $(( ${FLOWS_NUMBER_PARAMS_N} * 10 ))"
    assert env == {"FLOWS_NUMBER_PARAMS_N": value}
    assert number_problem("FLOWS_NUMBER_PARAMS_N", value) == (
        f"$FLOWS_NUMBER_PARAMS_N is {value!r}: a value the shell evaluates as arithmetic "
        "($((...)), ((...)), let, [[ -eq ]] and the like) must be an integer"
    )


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("value", "times_ten"),
    [("4", 40), (" 4 ", 40), ("-4", -40), ("+4", 40), ("0x4", 40), ("04", 40)],
)
def test_an_integer_in_an_arithmetic_expansion_is_taken(
    value: str, times_ten: int, shell: str
) -> None:
    text, env = shell_command("echo $(( ${{ params.n }} * 10 ))", lambda reference: value)
    assert number_problem("FLOWS_NUMBER_PARAMS_N", value) is None
    done = subprocess.run(
        [shell, "-c", text], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    assert done.stdout == f"{times_ten}\n"


BASH_ARITHMETIC = [
    "(( ${{ params.n }} > 0 )) && echo positive",
    "if ((${{ params.n }} > 0)); then echo positive; fi",
    "[[ ${{ params.n }} -gt 0 ]] && echo positive",
    '[[ 0 -lt "${{ params.n }}" ]] && echo positive',
    "[[ x == y || 0 -ne 1${{ params.n }} ]] && echo positive",
    "let 'x = ${{ params.n }} * 2' && echo positive",
    "v=xxxxxpositive; echo ${v:${{ params.n }}}",
    'v=positive; echo "${v:0:${{ params.n }}+3}"',
    "v=positive; echo ${v: -${{ params.n }}-3:${{ params.n }}+3}",
    "[ $[ ${{ params.n }} ] = 5 ] && echo positive",
]
"""Where bash evaluates a word as arithmetic beyond $((...)): its arithmetic command, and the
operands of -eq, -ne, -lt, -le, -gt and -ge in [[ ]], the arguments of let, a substring's
offset and length (${VAR:offset:length}) and $[ ]."""


@pytest.mark.skipif(not shutil.which("bash"), reason="bash is not installed")
@pytest.mark.parametrize("command", BASH_ARITHMETIC)
def test_a_value_that_bash_evaluates_as_arithmetic_runs_only_as_an_integer(
    command: str, tmp_path: Path
) -> None:
    """Where /bin/sh is bash, `(( ))` and a numeric test in `[[ ]]` evaluate the value as
    arithmetic too, so `a[$(cmd)]` there runs cmd: its variable is a number's, refused unless
    it holds an integer."""
    text, env = shell_command(command, lambda reference: "a[$(touch PWNED)]")
    [(name, value)] = env.items()
    assert name.startswith("FLOWS_NUMBER_") and number_problem(name, value) is not None
    text, env = shell_command(command, lambda reference: "5")
    done = subprocess.run(
        ["bash", "-c", text],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    assert done.stdout == "positive\n"


@pytest.mark.parametrize(
    "command",
    [
        '[[ "${{ params.n }}" == -lt ]] || echo x',
        "ls -lt ${{ params.n }}",
        "[ ${{ params.n }} = 1 ]",
        "let x=1; echo ${{ params.n }}",
        "echo let ${{ params.n }}",
        "outlet ${{ params.n }}",
        "echo ${v:-${{ params.n }}}",
        'echo "${v:=${{ params.n }}}"',
        "echo '${v:' ${{ params.n }}",
        "echo ${v:1} ${{ params.n }}",
    ],
)
def test_a_value_compared_as_text_or_given_to_a_command_is_any_text(command: str) -> None:
    _, env = shell_command(command, lambda reference: "a b")
    assert list(env) == ["FLOWS_PARAMS_N"]


def test_a_reference_in_and_out_of_an_arithmetic_expansion_has_two_variables(
    tmp_path: Path,
) -> None:
    text, env = shell_command(
        'echo "${{ params.n }}=$(( ${{ params.n }} ))"', lambda reference: "7"
    )
    assert env == {"FLOWS_PARAMS_N": "7", "FLOWS_NUMBER_PARAMS_N": "7"}
    assert run_shell(text, env, tmp_path) == "7=7\n"


def test_each_root_has_its_own_variables() -> None:
    names = {
        str(r): variable_name(r)
        for r in (
            Reference(("params", "day")),
            Reference(("run", "id")),
            Reference(("steps", "load", "outputs", "uri")),
            Reference(("output",)),  # a foreach variable named like a runtime variable
        )
    }
    assert names == {
        "params.day": "FLOWS_PARAMS_DAY",
        "run.id": "FLOWS_RUN_ID",
        "steps.load.outputs.uri": "FLOWS_STEPS_LOAD_OUTPUTS_URI",
        "output": "FLOWS_FOREACH_OUTPUT",
    }


def test_references_that_would_share_a_name_get_distinct_ones(tmp_path: Path) -> None:
    values = {"params.a-b": "dash", "params.a_b": "underscore"}
    text, env = shell_command(
        "printf %s ${{ params.a-b }} ${{ params.a_b }} ${{ params.a-b }}",
        lambda reference: values[str(reference)],
    )
    assert env == {"FLOWS_PARAMS_A_B": "dash", "FLOWS_PARAMS_A_B_2": "underscore"}
    assert run_shell(text, env, tmp_path) == "dashunderscoredash"
