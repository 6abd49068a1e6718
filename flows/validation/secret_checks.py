"""What ``flows validate`` says of credentials: an ``env:`` value that looks like one written in
the file (it would be stored in the job's data in Redis), and a secret named twice. Pure."""

from __future__ import annotations

import re
from typing import Final

from flows.flowfile.findings import DataPath, FindingSink
from flows.flowfile.model import Action, Flow
from scheduler.secrets import sensitive_name

# Shapes of well-known credentials, whatever the variable is called.
_KNOWN_SHAPES: Final = re.compile(
    r"AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|"
    r"sk-[A-Za-z0-9_-]{20,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|eyJ[A-Za-z0-9_-]{10,}\.eyJ"
)
# A value that only refers to another variable or a template holds no credential itself.
_REFERENCE: Final = re.compile(r"^\s*(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\{\{.*\}\})\s*$")


def looks_like_credential(name: str, value: str) -> bool:
    if not value or _REFERENCE.match(value):
        return False
    if _KNOWN_SHAPES.search(value):
        return True
    return sensitive_name(name) and len(value) >= 4 and "${{" not in value


def _actions(flow: Flow) -> list[tuple[str, DataPath, Action]]:
    found: list[tuple[str, DataPath, Action]] = [
        (f"step '{step_id}'", ("steps", step_id), step) for step_id, step in flow.steps.items()
    ]
    found += [(f"hook '{name}'", ("hooks", name), hook) for name, hook in flow.hooks.defined()]
    return found


def check_secrets(flow: Flow, sink: FindingSink) -> None:
    hook = flow.on.webhook if flow.on is not None else None
    if hook is not None:
        param = flow.params.get(hook.param)
        if param is None or param.type != "object":
            sink.error(
                ("on", "webhook", "param"),
                "webhook-param",
                f"the webhook's body goes to param '{hook.param}', which the flow must declare "
                "with type object",
                f"add params: {{{hook.param}: {{type: object, default: {{}}}}}}",
            )
    seen: set[str] = set()
    for index, name in enumerate(flow.secrets):
        if name in seen:
            sink.warning(("secrets", index), "secret-twice", f"secret {name} is named twice")
        seen.add(name)
    for label, base, action in _actions(flow):
        for name, value in action.env.items():
            if not looks_like_credential(name, value):
                continue
            hint = (
                f"add {name} to secrets: (resolved on the worker, masked in logs) and drop it "
                "from env"
                if name not in seen
                else f"{name} is in secrets: already; drop it from env"
            )
            sink.warning(
                (*base, "env", name),
                "literal-credential",
                f"{label}: env {name} looks like a credential written in the file: it is stored "
                "in the job's data in Redis",
                hint,
            )
