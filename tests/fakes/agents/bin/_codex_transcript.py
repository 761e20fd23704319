"""Lines of the observed Codex CLI 0.171.0 transcripts (coding-agents.md 2.6), verbatim:
the fake substitutes only the thread id."""

# fmt: off
SUCCESS = [
    '{"type":"thread.started","thread_id":"01a2309f-3e0c-7131-8437-cf8bea381ecb"}',
    '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `gpt-5-codex` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}',
    '{"type":"turn.started"}',
    '{"type":"error","message":"Reconnecting... 2/5 (unexpected status 200 OK: Unknown error, url: ws://127.0.0.1:18555/v1/responses)"}',
    '{"type":"item.completed","item":{"id":"item_1","type":"error","message":"Falling back from WebSockets to HTTPS transport. unexpected status 200 OK: Unknown error, url: ws://127.0.0.1:18555/v1/responses"}}',
    '{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc \'echo hello > hello.txt && cat hello.txt\'","aggregated_output":"","exit_code":null,"status":"in_progress"}}',
    '{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc \'echo hello > hello.txt && cat hello.txt\'","aggregated_output":"hello\\n","exit_code":0,"status":"completed"}}',
    '{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Done: created hello.txt."}}',
    '{"type":"turn.completed","usage":{"input_tokens":2400,"cached_input_tokens":2000,"cache_write_input_tokens":0,"output_tokens":80,"reasoning_output_tokens":20}}',
]
FAILURE_TAIL = [
    '{"type":"error","message":"Reconnecting... 5/5 (unexpected status 401 Unauthorized: Incorrect API key provided: sk-bad., url: http://127.0.0.1:18555/v1/responses)"}',
    '{"type":"error","message":"unexpected status 401 Unauthorized: Incorrect API key provided: sk-bad., url: http://127.0.0.1:18555/v1/responses"}',
    '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided: sk-bad., url: http://127.0.0.1:18555/v1/responses"}}',
]
# fmt: on
THREAD = "01a2309f-3e0c-7131-8437-cf8bea381ecb"
