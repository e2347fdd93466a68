"""What a sharded run paid over its attempts (issue 44, item 8): "paid over 5 attempts of the
eval" was printed for 4 shards and a retry, and "paid over 4 attempts" for 4 shards that each
ran once; shards are not attempts (med_evals.logs.usage)."""

from __future__ import annotations


def test_shards_are_not_attempts():
    """A sharded run paid more than it used only where a shard ran more than once."""
    from inspect_ai.model import ModelUsage

    from med_evals.logs.usage import Paid, RunUsage, merged_paid, paid_line

    def role(tokens: int) -> list:
        from med_evals.logs.usage import RoleUsage

        return [RoleUsage("model", "openai/x", ModelUsage(input_tokens=tokens, output_tokens=1,
                                                           total_tokens=tokens + 1), 1, 1)]

    once = merged_paid([Paid(role(10)) for _ in range(4)])
    assert once is not None and (once.attempts, once.shards) == (4, 4) and once.once()
    resumed = merged_paid([Paid(role(10)), Paid(role(10)), Paid(role(10)),
                           Paid(role(15), attempts=2, unknown="calls after the last flush")])
    assert resumed is not None and (resumed.attempts, resumed.shards) == (5, 4)
    assert not resumed.once()

    def usage(paid: Paid) -> RunUsage:
        from med_evals.logs.usage import Cost

        free = Cost(0.0, "test")
        return RunUsage(paid.roles, [free], free, "valid reply", 1, free, paid.attempts,
                        paid.unknown, paid.shards)

    used = usage(merged_paid([Paid(role(10)) for _ in range(4)]))  # type: ignore[arg-type]
    assert paid_line(usage(once), used) == ""
    assert paid_line(usage(resumed), used).startswith(
        "paid over 4 shards in 5 attempts: input tokens at least 45 (used by the finished run: "
        "40)")
    # one eval, as before
    single = Paid(role(15), attempts=2, unknown="calls after the last flush")
    assert paid_line(usage(single), usage(Paid(role(10)))).startswith(
        "paid over 2 attempts of the eval: input tokens at least 15 (used by the finished run: "
        "10)")
