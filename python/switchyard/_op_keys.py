"""Each Router by its key in torch.ops.switchyard.route's calls (switchyard.ops).

A Router takes its key when it is made (Router.__init__, Router.configured), outside any
torch.compile trace, so that a traced call only reads it. The table is weak: configured
copies (one per request in a server) go away with their last reference.
"""
import itertools
import weakref

_numbers = itertools.count()
_routers: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def new_key(router, entry: str) -> str:
    """A fresh key for `router` (named after its entry), recorded."""
    key = f"{entry}#{next(_numbers)}"
    _routers[key] = router
    return key


def router_for(key: str):
    """The Router whose key is `key`."""
    return _routers[key]
