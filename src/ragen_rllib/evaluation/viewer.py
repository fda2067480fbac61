"""``ragen-rllib view``: one self-contained HTML page of rollouts (the JSONL of ``ragen-rllib eval``).

No server and no network: styles and the filter script are inline. Every text that came from a model or an env
is HTML-escaped (model output is untrusted input); the page shows, per trajectory and turn by turn, the rendered
state, the reasoning and the answer (highlighted), the actions taken, their validity and the rewards, with a
summary table per env at the top and filters by env and by success. The filters also read the URL fragment
(``rollouts.html#env=<tag>&success=1``), so a link can open a filtered view.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}
.traj{border:1px solid #bbb;border-radius:6px;margin:.6em 0;padding:.2em .8em}
.traj.ok{border-left:6px solid #2a8a3a}.traj.fail{border-left:6px solid #b33}
summary{cursor:pointer;font-weight:600}
.turn{border-top:1px dashed #ccc;padding:.4em 0}
pre{background:#f5f5f5;padding:.4em;margin:.2em 0;white-space:pre-wrap;font-size:.9em}
.think{color:#555;font-style:italic;white-space:pre-wrap}
.answer{background:#fff3b0;padding:0 .3em;border-radius:3px;font-weight:600}
.bad{color:#b33;font-weight:600}.good{color:#2a8a3a}
.controls{margin:.5em 0 1em}.controls label{margin-right:1.5em}
"""

SCRIPT = """
function applyFilters() {
  var env = document.getElementById('env-filter').value;
  var success = document.getElementById('success-filter').value;
  var shown = 0;
  document.querySelectorAll('.traj').forEach(function (el) {
    var ok = (env === '' || el.dataset.env === env) && (success === '' || el.dataset.success === success);
    el.style.display = ok ? '' : 'none';
    el.dataset.shown = ok ? '1' : '0';
    if (ok) { shown += 1; }
  });
  document.getElementById('shown-count').textContent = String(shown);
}
function readFragment() {
  var params = new URLSearchParams(window.location.hash.slice(1));
  if (params.has('env')) { document.getElementById('env-filter').value = params.get('env'); }
  if (params.has('success')) { document.getElementById('success-filter').value = params.get('success'); }
}
document.addEventListener('DOMContentLoaded', function () {
  readFragment();
  document.getElementById('env-filter').addEventListener('change', applyFilters);
  document.getElementById('success-filter').addEventListener('change', applyFilters);
  applyFilters();
});
"""


def read_rollouts(path: str | Path) -> list[dict[str, Any]]:
    """The trajectories of a rollouts JSONL file; a line that is not a JSON object names its line number."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (write one with `ragen-rllib eval ... --out {path.name}`)")
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number} is not JSON ({err.msg}); expected one trajectory per line") from None
        if not isinstance(row, dict) or "turns" not in row:
            raise ValueError(f"{path}:{number} is not a trajectory (a JSON object with 'turns')")
        out.append(row)
    return out


def summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per env (then ``all``): trajectories, success rate, mean return, share of turns with a valid action."""
    def stats(name: str, part: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        turns = [t for r in part for t in r.get("turns", [])]
        return {"env": name, "trajectories": len(part),
                "success": sum(bool(r.get("success")) for r in part) / max(len(part), 1),
                "return": sum(float(r.get("return") or 0.0) for r in part) / max(len(part), 1),
                "valid_turns": sum(bool(t.get("action_is_valid")) for t in turns) / max(len(turns), 1)}

    envs = list(dict.fromkeys(str(r.get("env", "")) for r in rows))
    table = [stats(env, [r for r in rows if str(r.get("env", "")) == env]) for env in envs]
    return table + [stats("all", rows)] if len(envs) > 1 else table


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _turn(i: int, turn: Mapping[str, Any]) -> str:
    valid = turn.get("action_is_valid")
    actions = ", ".join(map(str, turn.get("actions") or [])) or "(none)"
    think = turn.get("think")
    return (f'<div class="turn"><b>Turn {i}</b><pre class="state">{_e(turn.get("state"))}</pre>'
            + (f'<div class="think">{_e(think)}</div>' if think else "")
            + f'<div>answer: <span class="answer">{_e(turn.get("answer"))}</span></div>'
            f'<div>actions: {_e(actions)} &middot; <span class="{"good" if valid else "bad"}">'
            f'{"valid" if valid else "invalid"}</span>'
            + ("" if turn.get("format_ok", True) else ' &middot; <span class="bad">format error</span>')
            + f' &middot; reward {float(turn.get("reward") or 0.0):+.3f} &middot; '
            f'{int(turn.get("response_tokens") or 0)} tokens</div>'
            f'<details><summary>raw response</summary><pre>{_e(turn.get("response"))}</pre></details></div>')


def _trajectory(i: int, row: Mapping[str, Any]) -> str:
    ok = bool(row.get("success"))
    turns = row.get("turns") or []
    side = (f'agent {_e(row["agent"])} (module {_e(row.get("module"))}) &middot; ' if row.get("agent") else "")
    head = (f'#{i} &middot; {_e(row.get("env"))} &middot; {side}seed {_e(row.get("seed"))} &middot; '
            f'{"success" if ok else "failure"} &middot; return {float(row.get("return") or 0.0):+.3f} &middot; '
            f'{len(turns)} turns')
    error = f'<div class="bad">error: {_e(row["error"])}</div>' if row.get("error") else ""
    body = "".join(_turn(j + 1, t) for j, t in enumerate(turns))
    final = f'<div class="turn"><b>Final state</b><pre>{_e(row.get("final_state"))}</pre></div>'
    opened = " open" if i == 1 else ""  # the first trajectory unfolded
    return (f'<details class="traj {"ok" if ok else "fail"}"{opened} data-env="{_e(row.get("env"))}" '
            f'data-success="{int(ok)}"><summary>{head}</summary>{error}{body}{final}</details>')


def render(rows: Sequence[Mapping[str, Any]], title: str = "Rollouts") -> str:
    """The whole page."""
    table = "".join(f'<tr><td>{_e(s["env"])}</td><td>{s["trajectories"]}</td><td>{s["success"]:.1%}</td>'
                    f'<td>{s["return"]:+.3f}</td><td>{s["valid_turns"]:.1%}</td></tr>' for s in summary(rows))
    envs = "".join(f'<option value="{_e(env)}">{_e(env)}</option>'
                   for env in dict.fromkeys(str(r.get("env", "")) for r in rows))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style><script>{SCRIPT}</script></head><body>"
            f"<h1>{_e(title)}</h1>"
            "<table id=\"summary\"><tr><th>env</th><th>trajectories</th><th>success</th><th>mean return</th>"
            f"<th>valid turns</th></tr>{table}</table>"
            "<div class=\"controls\"><label>env <select id=\"env-filter\"><option value=\"\">all</option>"
            f"{envs}</select></label><label>outcome <select id=\"success-filter\"><option value=\"\">all</option>"
            "<option value=\"1\">success</option><option value=\"0\">failure</option></select></label>"
            f"showing <span id=\"shown-count\">{len(rows)}</span> of {len(rows)}</div>"
            + "".join(_trajectory(i + 1, r) for i, r in enumerate(rows)) + "</body></html>")


def write_view(rollouts: str | Path, out: str | Path, title: str | None = None) -> Path:
    """Read a rollouts JSONL and write its HTML page; returns the page's path."""
    rows = read_rollouts(rollouts)
    out = Path(out)
    out.write_text(render(rows, title or f"Rollouts: {Path(rollouts).name}"), encoding="utf-8")
    return out

