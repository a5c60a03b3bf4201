"""llamars-server: a Litestar app that serves llama-server's and OpenAI's HTTP APIs."""
