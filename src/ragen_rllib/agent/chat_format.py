"""Token-exact chat formatting with the tokenizer's own chat template.

Prompts are rendered by the template as text and tokenised, but assistant turns are never re-encoded: a
rendered conversation carries a sentinel where each assistant message goes, the text around the
sentinels is tokenised piece by piece, and the ids the engine sampled are spliced in between. This works
for any template that renders each message in place (ChatML/Qwen, Llama-3, the tiny model's).
"""

from __future__ import annotations

from collections.abc import Sequence

SYSTEM, USER, ASSISTANT = "system", "user", "assistant"
_SENTINEL = "\u27e6RAGEN-ASSISTANT-{}\u27e7"


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

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (no BOS/EOS added: the template writes those itself)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode_response(self, ids: Sequence[int]) -> str:
        """The text the parser sees for a response: the prefill + the response without special tokens."""
        return self.prefill + self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def prompt(
        self, system: str, turns: Sequence[tuple[str, Sequence[int]]], user: str
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """Generation prompt for ``system``, earlier ``(user_text, sampled_ids)`` turns and a new ``user`` text.

        Returns:
            ids: the prompt token ids, ending with the generation prompt and the prefill.
            spans: ``(start, end)`` of each earlier turn's sampled ids inside ``ids`` (end exclusive).
        """
        messages = [{"role": SYSTEM, "content": system}]
        for i, (user_text, _) in enumerate(turns):
            messages.append({"role": USER, "content": user_text})
            messages.append({"role": ASSISTANT, "content": self.prefill + _SENTINEL.format(i)})
        messages.append({"role": USER, "content": user})
        pieces = self._split(self.render(messages, add_generation_prompt=True), len(turns))
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

    def continuation(self, system: str, last_user: str, last_response: Sequence[int], user: str) -> list[int]:
        """Ids that follow ``last_response`` to reach the next generation prompt (end of turn, ``user``, prefill).

        ``prompt(system, [], u1) + r1 + continuation(system, u1, r1, u2) == prompt(system, [(u1, r1)], u2)[0]``
        for templates that render a message independently of the ones after it.
        """
        messages = [
            {"role": SYSTEM, "content": system},
            {"role": USER, "content": last_user},
            {"role": ASSISTANT, "content": self.prefill + _SENTINEL.format(0)},
            {"role": USER, "content": user},
        ]
        after = self._split(self.render(messages, add_generation_prompt=True), 1)[1]
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
