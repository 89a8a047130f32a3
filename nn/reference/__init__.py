"""NumPy twins of nn's maths, for the tests and the train benchmark (never imported by nn itself):
`layers` (the layers' and optimizers' formulas, forward and backward) and `gpt` (the GPT's, on them)."""
