"""Backends agui-store gives other libraries, each an optional extra.

- :mod:`agui_store.integrations.pydantic_ai`: a durable ``ConversationStore`` for
  pydantic-ai (``pip install 'agui-store[pydantic-ai]'``).

Nothing here is imported by ``import agui_store``: a module is imported when it is used.
"""
