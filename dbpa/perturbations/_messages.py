"""Where a perturbation goes in a chat: the user prompt (the last user message) or the system
message."""

from __future__ import annotations

from collections.abc import Sequence

from dbpa.specs import Message


def user_prompt_index(messages: Sequence[Message]) -> int:
    """Index of the user prompt: the last message with role ``user``."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    raise ValueError("the original has no user message to perturb")


def with_content(messages: Sequence[Message], index: int, content: str) -> tuple[Message, ...]:
    """``messages`` with the content of message ``index`` replaced as a whole."""
    changed = messages[index].model_copy(update={"content": content})
    return (*messages[:index], changed, *messages[index + 1 :])


def with_system(messages: Sequence[Message], content: str) -> tuple[tuple[Message, ...], bool]:
    """``messages`` whose system message is ``content``, and whether one was replaced
    (False: it was added in front, the original having none)."""
    indices = [i for i, m in enumerate(messages) if m.role == "system"]
    if len(indices) > 1:
        raise ValueError(f"the original has {len(indices)} system messages; expected at most one")
    if indices:
        return with_content(messages, indices[0], content), True
    return (Message(role="system", content=content), *messages), False
