"""The timeline a failure prints: one line per event, whatever the agent's text holds."""

from __future__ import annotations

from pytest_agentckpt.timeline import Timeline


def test_a_multi_line_answer_stays_on_its_events_line_with_its_breaks_escaped() -> None:
    timeline = Timeline()
    timeline.start_attempt()
    timeline.add("model_response", index=1, status=200, tool_uses=(), text="Done.\nSent 2 emails.\tOK")
    timeline.add("attempt_end", outcome="completed", detail="Done.\r\nSent 2 emails.")
    timeline.add("tool_error", tool="send", content="refused:\nno such address")

    lines = timeline.format().splitlines()

    assert len(lines) == len(timeline.events)
    assert lines[1].endswith(r"text: Done.\nSent 2 emails.\tOK")
    assert lines[2].endswith(r"completed Done.\r\nSent 2 emails.")
    assert lines[3].endswith(r"answered an error: refused:\nno such address")


def test_printable_text_is_shown_as_it_is_accents_and_quotes_included() -> None:
    timeline = Timeline()
    timeline.start_attempt()
    timeline.add("model_response", index=1, status=200, tool_uses=(), text='Réponse "finale" ✓')

    assert timeline.format().splitlines()[1].endswith('text: Réponse "finale" ✓')
