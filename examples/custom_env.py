"""A custom env in a few lines: define, register, check, and play it with a scripted policy.

The task: add two numbers with an `add` tool, then answer in text. Run `python examples/custom_env.py`."""

import rlgym_llm
from rlgym_llm import Env, Step, StepSignals, Task, function_tool


class SumEnv(Env):
    """Reward 1.0 for a final text answer equal to the sum; tool calls are free."""

    def sample_task(self, options):
        a, b = (int(x) for x in self.np_random.integers(100, 1000, size=2))  # each env owns its RNG
        prompt = f"What is {a} + {b}? Use the `add` tool, then reply with the number."
        return Task(id=f"sum-{a}-{b}", prompt=prompt, answer=a + b)

    def opening(self, task):
        return [{"role": "user", "content": task.prompt}]

    def new_episode(self, task):  # per-episode state, reset by every `reset`
        self.answered = None

    @function_tool  # the signature and docstring are the tool's schema; model output is validated first
    def add(self, a: int, b: int) -> str:
        """Add two integers exactly.

        Args:
            a: first addend
            b: second addend
        """
        return str(a + b)

    def respond(self, turn):
        if not turn.tool_calls:  # a text turn is the final answer
            self.answered = turn.content.strip()
            reward = self.outcome()["reward"]
            return Step([], reward=reward, terminated=True, signals=StepSignals(reward_components={"correct": reward}))
        return super().respond(turn)  # runs the tool calls, one tool message each

    def outcome(self):
        correct = float(self.answered == str(self.task.answer))
        return {"reward": correct, "components": {"correct": correct}}


def scripted_policy(messages):
    """Call the tool on the numbers in the prompt, then repeat the tool's result as the answer."""
    last = messages[-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": last["content"]}
    a, b = (int(w) for w in last["content"].replace("?", "").split() if w.isdigit())
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": a, "b": b}}],
    }


if __name__ == "__main__":
    rlgym_llm.register("example/Sum-v0", SumEnv, max_turns=4)
    print(rlgym_llm.check_env("example/Sum-v0").format())

    env = rlgym_llm.make("example/Sum-v0")
    messages, info = env.reset(seed=42)
    print(f"task {info['task_id']}: {messages[0]['content']}")
    while True:
        action = scripted_policy(messages)
        messages, reward, terminated, truncated, info = env.step(action)
        print(f"  assistant: {action}\n  env: {messages} reward={reward}")
        if terminated or truncated:
            break
    print(f"outcome: {info['outcome']}")
