"""Streaming pulls of subscriptions without message ordering, read without the client library's hold per ordering
key (`subscribe_unkeyed`).

google-cloud-pubsub (2.x, `subscriber/_protocol/messages_on_hold.py`) hands its callback one message per ordering
key at a time for every message that carries a key, whether the subscription orders them or not: a key's next message
waits in the client until the one before it is acked, nacked or dropped. The Go client had the same behaviour and
changed it to follow the subscription's `enable_message_ordering` (googleapis/google-cloud-go#3884, fixed by #3886).
A subscription without ordering still receives the keys its messages were published with -- a dead-letter drain
receives them from an ordered topic's dead-lettered messages -- so the probe's client serialised that subscription per
key. In a 2-hour watch (issue 63), once the dead-letter drain's deliveries slowed (the emulator's stall, docs/watch.md)
and the machine's load reached 23, the messages waiting behind their keys kept their leases while redeliveries of
the same keys queued behind them: about 65,000 held in the probe's client, never handed to the probe.

So on an unordered subscription the probe opens the streaming pull itself, as `SubscriberClient.subscribe` does, with
a hold that keeps the library's arrival order and flow control but no per-key queue. An ordered subscription keeps the
library's hold: there it is the ordering guarantee the client owes its callback."""

from __future__ import annotations

from typing import Callable


def _unkeyed_hold_class():
    from google.cloud.pubsub_v1.subscriber._protocol.messages_on_hold import MessagesOnHold

    class UnkeyedHold(MessagesOnHold):
        """The library's hold, first in first out, every message released as flow control allows, keyed or not."""

        def get(self):
            if not self._messages_on_hold:
                return None
            self._size -= 1
            return self._messages_on_hold.popleft()

        def activate_ordering_keys(self, ordering_keys, schedule_message_on_hold) -> None:
            pass  # no key ever waits here: nothing to release when one is settled

    return UnkeyedHold


def subscribe_unkeyed(client, subscription: str, callback: Callable, flow_control) -> object | None:
    """A streaming pull of `subscription` whose messages reach `callback` without waiting behind their ordering key;
    the library's `StreamingPullFuture`. None when this client library keeps its hold elsewhere (its internals
    changed): the caller then subscribes as usual and says so."""
    from google.cloud.pubsub_v1.subscriber import futures
    from google.cloud.pubsub_v1.subscriber._protocol import streaming_pull_manager
    from google.cloud.pubsub_v1.subscriber._protocol.messages_on_hold import MessagesOnHold

    manager = streaming_pull_manager.StreamingPullManager(client, subscription, flow_control=flow_control)
    if type(getattr(manager, "_messages_on_hold", None)) is not MessagesOnHold:
        return None
    manager._messages_on_hold = _unkeyed_hold_class()()
    future = futures.StreamingPullFuture(manager)
    manager.open(callback=callback, on_callback_error=future.set_exception)
    return future
