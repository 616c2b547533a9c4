"""Judge backends: each turns prompts into raw outputs and token logprobs."""
