"""Provider formats around the chat renderer: Responses API items in, Responses and Anthropic
Messages requests out. Pure and deterministic: the same input always gives the same output."""
