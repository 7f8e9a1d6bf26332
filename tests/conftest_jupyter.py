"""A pytest plugin that runs `async def` tests on pytest-jupyter's event loop.

pytest-jupyter is not loaded as a plugin for the whole suite: its autouse fixtures
create and close an event loop around every test, which breaks Playwright's sync
API (the browser tests) and anything else that owns a loop. A test module that
needs the server fixtures imports them instead, so they apply to it alone:

    pytest_plugins = ("conftest_jupyter",)
    from pytest_jupyter.jupyter_server import *  # noqa: F403  (jp_fetch, jp_serverapp, ...)

This plugin only adds what a module cannot: the hook that runs its coroutine tests.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    loop = pyfuncitem.funcargs.get("jp_asyncio_loop")
    if not isinstance(loop, asyncio.AbstractEventLoop):
        pytest.fail(f"{pyfuncitem.name} is async: its module must import pytest-jupyter's fixtures "
                    "(from pytest_jupyter.jupyter_server import *)", pytrace=False)
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    loop.run_until_complete(pyfuncitem.obj(**kwargs))
    return True
