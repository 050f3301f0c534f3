"""What the tests share (test modules import from here, never from each other; tests/test_architecture.py checks
it): fixture sources built from the vendored real speech (`sources`), the MELD-shaped fixture (`meld`),
synthetic tones and the wrapper tests' prompts (`synthetic_audio`), the one-line-error checks (`user_errors`),
the runner's fake model, world and release (`runner`), a synthetic folder source and its build
(`folder_source`), the listening server and its client (`listening_server`), the probing fakes (`probing`),
the external runtimes' fakes (`fake_runtimes`, `runtime_finetune`) and a loopback vLLM-like server (`vllm_server`)."""
