"""An ``async def`` test under chaos mode leaves no task whose exception nobody retrieved.

A crash is a ``SystemExit``: raised in one of the tasks of ``asyncio.gather``, it stops the
event loop at once and leaves the test's own task waiting. A plugin such as
pytest-asyncio runs the resume on the same loop (a function-scoped one survives the
crash, as every fixture does), and the orphaned task then ends with the crash chaos mode
turned into an exception: asyncio used to print "Task exception was never retrieved".
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

AGENT = Path(__file__).parents[2] / "docs" / "examples" / "gather_agent.py"

# The part of pytest-asyncio that matters here: a function-scoped loop runs the test.
CONFTEST = '''
import asyncio
import gc
import inspect
from pathlib import Path

import pytest

from pytest_agentckpt import Toolbox


@pytest.fixture
def agentckpt_tools():
    import gather_agent

    return Toolbox.from_functions(
        gather_agent.fetch_page, gather_agent.send_invoice, kinds={"send_invoice": "keyed"}
    )


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    messages = []
    loop.set_exception_handler(lambda loop, context: messages.append(context["message"]))
    yield loop
    gc.collect()
    loop.close()
    with Path("loop_messages.txt").open("a") as out:
        out.writelines(m + "\\n" for m in messages)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    loop = pyfuncitem.funcargs["loop"]
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    loop.run_until_complete(loop.create_task(pyfuncitem.obj(**kwargs)))
    return True
'''

#: The test modules' common head: the gather agent and a plan with two parallel calls.
HEAD = '''
import pytest
import gather_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(
    steps=(Step((ToolCall("fetch_page", {"url": "https://example.com/terms"}),
                 ToolCall("send_invoice", {"customer": "acme", "amount": 120}))),),
    final_answer="done",
)
'''

TEST = HEAD + '''


@pytest.mark.agentckpt_model(plan=PLAN)
async def test_gather(loop, async_anthropic_client, checkpoint_store, agentckpt_tools):
    answer = await gather_agent.run("t", "go", client=async_anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert answer == "done"
'''


def test_a_crash_in_a_gathered_task_leaves_no_unretrieved_task_exception(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(gather_agent=AGENT.read_text(), test_gather=TEST)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:anyio", "--agentckpt-chaos")
    result.assert_outcomes(passed=1)
    messages = (pytester.path / "loop_messages.txt").read_text().splitlines()
    assert "Task exception was never retrieved" not in messages, messages


SYNC_TEST = HEAD + '''
import asyncio


@pytest.mark.agentckpt_model(plan=PLAN)
def test_gather_under_asyncio_run(async_anthropic_client, checkpoint_store, agentckpt_tools):
    run = gather_agent.run("t", "go", client=async_anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert asyncio.run(run) == "done"
'''


def test_a_crash_under_asyncio_run_leaves_no_task_exception_message(pytester: pytest.Pytester) -> None:
    # asyncio.run cannot finish the tasks a crash (a SystemExit) leaves: asyncio logged
    # each one that held the crash, as it was collected, often after the session.
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(gather_agent=AGENT.read_text(), test_sync=SYNC_TEST)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", "--agentckpt-chaos")
    result.assert_outcomes(passed=1)
    assert "never retrieved" not in result.stdout.str() + result.stderr.str()
