"""DeepSeek Harness's ask-user channel, opened for tasks with ``ask_user``: a user-questions provider.

The runtime (0.1.0rc6) bundles the ``ctx.userQuestions`` seam (``@deepseek-ai/dsh-user-questions``)
and the model-facing tool over it (``@deepseek-ai/dsh-tool-ask-user``: ``ask_user_question
{questions: [{id, question, header?, options?: [{label, description?}], multi_select?}]}``), but
the bundled ``cordis.yml`` mounts neither, and no provider: the seam is answered by the one
provider the *embedding client* registers (its UI); without one a call fails "no user-questions
provider is registered". So for a task with ``ask_user`` the adapter runs the bundled file plus
three entries (:func:`ask_cordis`): the two bundled packages and :data:`PROVIDER_FILE`, the
benchmark's provider, written beside the cordis file (plugins named ``./x.mjs`` load relative to
it). The provider is the benchmark acting as the client's UI, like Claude Code's
permission-prompt tool — not harness behaviour: the tool, its schema, the seam and how the
answer reaches the model (the tool result ``{"answers": [...]}`` as JSON text) are the runtime's.

The provider forwards each ask to the client as a JSON-RPC request on the runtime's stdout
(:data:`ASK_METHOD`, params ``{sessionId, questions: [{id, question, header?, options?,
multiSelect?}]}``); the client (:class:`harnesses.deepseek.rpc.Runtime`, on the host) answers it
through the benchmark's simulated user (:class:`apparatus.simulators.AskUserResponder`, ledger
``<run>/private/ledgers/_ask_user.jsonl``) with :func:`answer_questions`:

* the user's answer names one of the offered option labels -> ``{"id", "selected": [label]}``
  (a pick, as a UI reports a clicked option);
* otherwise (no options, or an answer none of them names) -> ``{"id", "selected": [], "custom":
  text}`` (the text the user typed; ``selected`` is required by the tool's output schema, so it
  is present and empty).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from apparatus.simulators.user import option_labels
from tracetrial.task import TaskPack

#: The JSON-RPC method the provider sends to the client for one ``ctx.userQuestions.ask()``.
ASK_METHOD = "userQuestions/ask"
#: The provider plugin (shipped beside this module; the adapter copies it next to the cordis file).
PROVIDER_FILE = Path(__file__).with_name("tt-ask-provider.mjs")
#: The cordis entries appended to the bundled default config for a task with ``ask_user``.
CORDIS_ENTRIES = f"""
# TraceTrial (tasks with ask_user): the runtime's own ask-user plugins - the ctx.userQuestions
# seam and the model-facing ask_user_question tool - and the benchmark's provider for the seam
# (the embedding client's UI: questions go to the SDK client over stdio JSON-RPC).
- id: user-questions
  name: '@deepseek-ai/dsh-user-questions'

- id: tool-ask-user
  name: '@deepseek-ai/dsh-tool-ask-user'

- id: tt-ask-provider
  name: './{PROVIDER_FILE.name}'
"""

#: ``answer(question, options, request_id, raw) -> (text, option)``: the simulated user's answer
#: to one question; ``option`` is the offered label the answer picked, or ``None``.
Answer = Callable[[str, list[str] | None, str | None, Any], tuple[str, str | None]]


def ask_cordis(bundled: str) -> str:
    """The cordis file of an ask-user task: the bundled one, then :data:`CORDIS_ENTRIES`."""
    return bundled.rstrip("\n") + "\n" + CORDIS_ENTRIES


def write_ask_config(bundled: Path, folder: Path) -> Path:
    """Write ``folder/cordis.yml`` (:func:`ask_cordis` of ``bundled``) and the provider beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PROVIDER_FILE.name).write_bytes(PROVIDER_FILE.read_bytes())
    cordis = folder / "cordis.yml"
    cordis.write_text(ask_cordis(bundled.read_text(encoding="utf-8")), encoding="utf-8")
    return cordis


def answer_questions(params: Any, answer: Answer, request_id: str | None = None) -> dict[str, Any]:
    """The ``userQuestions/ask`` result for ``params``: one answer per question, in order
    (pure apart from ``answer``). A pick of an offered label is ``selected``; anything else the
    user says is ``custom`` text with nothing selected."""
    questions = params.get("questions") if isinstance(params, dict) else None
    answers: list[dict[str, Any]] = []
    for q in questions if isinstance(questions, list) else []:
        if not isinstance(q, dict):
            continue
        qid = str(q.get("id", ""))
        text, option = answer(str(q.get("question", "")), option_labels(q), request_id, q)
        if option is not None:
            answers.append({"id": qid, "selected": [option]})
        else:
            answers.append({"id": qid, "selected": [], "custom": text})
    return {"answers": answers}


def simulated_user(task: TaskPack, run_private: Path) -> Answer:
    """:data:`Answer` through the benchmark's simulated user of ``task`` (ledger under
    ``run_private``), in the client's own process: the client runs on the host, outside the
    harness's sandbox, so the pack's private truth never enters it. The responder is built per question (its ledger is append-only and
    its ``init`` idempotent), so nothing is read before the model asks."""

    def answer(question: str, options: list[str] | None, request_id: str | None, raw: Any) -> tuple[str, str | None]:
        from apparatus.simulators.user import AskUserResponder, ClarificationRequest

        responder = AskUserResponder.from_task(task, run_private)
        got = responder.answer(ClarificationRequest(question=question, options=options, request_id=request_id,
                                                    raw=raw))
        return got.text, got.option

    return answer
