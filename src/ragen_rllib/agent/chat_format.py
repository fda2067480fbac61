"""Token-exact chat formatting with the tokenizer's own chat template.

Prompts are rendered by the template as text and tokenised, but assistant turns are never re-encoded: a
rendered conversation carries a sentinel where each assistant message goes, the text around the
sentinels is tokenised piece by piece, and the ids the engine sampled are spliced in between. This works
for any template that renders each message in place (ChatML/Qwen, Llama-3, the tiny model's).

Tools: a turn's input is a user text or a list of messages (tool results). When the template renders the
``tools=`` argument (Qwen2, Hermes, Llama-3.1, ...), tools go to the template and results are ``tool`` messages;
otherwise (SmolLM2, the tiny model) the caller describes the tools in the system text and the results go back
as one user message of ``<tool_response>`` blocks, Hermes' text format.
"""

from __future__ import annotations

from collections.abc import Sequence

SYSTEM, USER, ASSISTANT, TOOL = "system", "user", "assistant", "tool"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
_SENTINEL = "\u27e6RAGEN-ASSISTANT-{}\u27e7"
_PROBE_TOOL = "ragen_probe_tool_7f3a"

#: A chat message (``{"role": ..., "content": ...}``).
Message = dict[str, str]
#: What a turn starts from: a user text, or messages (e.g. tool results).
TurnInput = str | Sequence[Message]


def as_messages(user: TurnInput) -> list[Message]:
    """The messages of a turn input (a plain text is one user message)."""
    return [{"role": USER, "content": user}] if isinstance(user, str) else [dict(m) for m in user]


class ChatFormat:
    """Builds prompt token ids from (system, user..., sampled assistant ids...) conversations.

    Args:
        tokenizer: a Hugging Face tokenizer with a ``chat_template``.
        prefill: text put after the template's generation prompt (RAGEN: ``<think>``); it is part of the
            prompt, and also sits in front of every earlier assistant turn as the model saw it.
    """

    def __init__(self, tokenizer, prefill: str = "") -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', tokenizer)!r} has no chat_template; use an instruct "
                "model's tokenizer or set tokenizer.chat_template"
            )
        self.tokenizer = tokenizer
        self.prefill = prefill
        self._special_ids = set(tokenizer.all_special_ids)
        self.native_tools = self._renders_tools()

    def _renders_tools(self) -> bool:
        """The template shows the ``tools=`` it is given (probed once with a dummy tool)."""
        probe = [{"type": "function", "function": {"name": _PROBE_TOOL, "description": "probe",
                                                   "parameters": {"type": "object", "properties": {}}}}]
        try:
            messages = [{"role": SYSTEM, "content": "s"}, {"role": USER, "content": "u"}]
            text = self.tokenizer.apply_chat_template(messages, tools=probe, tokenize=False,
                                                      add_generation_prompt=True)
        except Exception:  # a template that cannot take tools (any jinja error): the text format is used
            return False
        return _PROBE_TOOL in text

    def tool_messages(self, results: Sequence[str]) -> list[Message]:
        """The messages that hand tool results back (see the module docstring)."""
        if self.native_tools:
            return [{"role": TOOL, "content": r} for r in results]
        return [{"role": USER, "content": "\n".join(f"{TOOL_RESPONSE_OPEN}\n{r}\n{TOOL_RESPONSE_CLOSE}"
                                                     for r in results)}]

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (no BOS/EOS added: the template writes those itself)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode_response(self, ids: Sequence[int]) -> str:
        """The text the parser sees for a response: the prefill + the response without special tokens."""
        return self.prefill + self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def render(self, messages: list[Message], add_generation_prompt: bool, tools: Sequence[dict] | None = None) -> str:
        extra = {"tools": list(tools)} if tools and self.native_tools else {}
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **extra
        )

    def prompt(
        self, system: str, turns: Sequence[tuple[TurnInput, Sequence[int]]], user: TurnInput,
        tools: Sequence[dict] | None = None,
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """Generation prompt for ``system``, earlier ``(input, sampled_ids)`` turns and a new input ``user``.
        ``tools`` (``tools=`` schemas) go to a template that renders them.

        Returns:
            ids: the prompt token ids, ending with the generation prompt and the prefill.
            spans: ``(start, end)`` of each earlier turn's sampled ids inside ``ids`` (end exclusive).
        """
        messages = [{"role": SYSTEM, "content": system}]
        for i, (turn_input, _) in enumerate(turns):
            messages += as_messages(turn_input)
            messages.append({"role": ASSISTANT, "content": self.prefill + _SENTINEL.format(i)})
        messages += as_messages(user)
        pieces = self._split(self.render(messages, add_generation_prompt=True, tools=tools), len(turns))
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        for i, piece in enumerate(pieces):
            if i > 0:
                sampled = list(turns[i - 1][1])
                spans.append((len(ids), len(ids) + len(sampled)))
                ids += sampled
                piece = self._after_response(sampled, piece)
            if i == len(pieces) - 1:
                piece += self.prefill
            ids += self.encode(piece)
        return ids, spans

    def continuation(self, system: str, last_user: TurnInput, last_response: Sequence[int], user: TurnInput,
                     tools: Sequence[dict] | None = None) -> list[int]:
        """Ids that follow ``last_response`` to reach the next generation prompt (end of turn, ``user``, prefill).

        ``prompt(system, [], u1) + r1 + continuation(system, u1, r1, u2) == prompt(system, [(u1, r1)], u2)[0]``
        for templates that render a message independently of the ones after it.
        """
        messages = [{"role": SYSTEM, "content": system}, *as_messages(last_user),
                    {"role": ASSISTANT, "content": self.prefill + _SENTINEL.format(0)}, *as_messages(user)]
        after = self._split(self.render(messages, add_generation_prompt=True, tools=tools), 1)[1]
        return self.encode(self._after_response(list(last_response), after) + self.prefill)

    def _after_response(self, sampled: list[int], piece: str) -> str:
        """Drop the end-of-turn marker from ``piece`` when the engine already sampled it (e.g. ``<|im_end|>``)."""
        if sampled and sampled[-1] in self._special_ids:
            marker = self.tokenizer.convert_ids_to_tokens(sampled[-1])
            if isinstance(marker, str) and piece.startswith(marker):
                return piece[len(marker):]
        return piece

    @staticmethod
    def _split(text: str, n: int) -> list[str]:
        pieces = []
        for i in range(n):
            sentinel = _SENTINEL.format(i)
            head, sep, text = text.partition(sentinel)
            if not sep:
                raise ValueError(
                    "the chat template dropped or rewrote assistant message content; ragen_rllib needs a template "
                    "that renders each message's content verbatim"
                )
            pieces.append(head)
        pieces.append(text)
        return pieces
