import io

from relay.core import forward, keep


def test_keep_only_handled_events():
    assert keep({"type": "order.paid"}) and not keep({"type": "cart.viewed"})


def test_forward_counts_what_it_sends():
    out = io.StringIO()
    assert forward(['{"type": "order.paid", "id": 1}', '{"type": "cart.viewed"}'], out) == 1
