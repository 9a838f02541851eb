# winx: two commands for a newcomer — `make run` serves MCP on stdio, `make test` runs
# every check (format, lint, unit, integration and Python SDK interop tests).

CARGO ?= cargo
VENV := target/venv
PYTHON := $(VENV)/bin/python
# The official MCP Python SDK used by the interop tests (pinned for reproducible CI).
MCP_SDK_VERSION := 2.3.0
# The official MCP TypeScript SDK (what most desktop hosts embed), pinned the same way.
TS_SDK_VERSION := 1.32.2
NODE_SDK := target/node
# The real agent hosts the host tests drive (tests/hosts_*.rs): npm packages whose native
# binaries run offline against a scripted model on loopback. Pinned like the SDKs.
CLAUDE_CODE_VERSION := 2.1.328
CODEX_VERSION := 0.169.0
HOSTS := target/hosts

.PHONY: build run test lint fmt bench bench-peers peers venv node-sdk hosts shells browser ctags clean

build:
	$(CARGO) build --release --bins

run: build
	./target/release/winx-code-agent serve

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

# The venv is rebuilt only when missing or when the pinned SDK version changes.
$(VENV)/.mcp-$(MCP_SDK_VERSION):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "mcp==$(MCP_SDK_VERSION)"
	touch $@

venv: $(VENV)/.mcp-$(MCP_SDK_VERSION)

# Node.js comes from Debian's packages when missing; the SDK from the npm registry.
$(NODE_SDK)/.sdk-$(TS_SDK_VERSION):
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 \
		|| { $(call apt_install,nodejs npm); }
	mkdir -p $(NODE_SDK)
	npm install --silent --no-audit --no-fund --prefix $(NODE_SDK) "@modelcontextprotocol/sdk@$(TS_SDK_VERSION)"
	touch $@

node-sdk: $(NODE_SDK)/.sdk-$(TS_SDK_VERSION)

# Claude Code and Codex CLI from the npm registry (about 760 MB with their native
# binaries, about 30 s); reinstalled only when a pinned version changes.
$(HOSTS)/.hosts-$(CLAUDE_CODE_VERSION)-$(CODEX_VERSION): $(NODE_SDK)/.sdk-$(TS_SDK_VERSION)
	mkdir -p $(HOSTS)
	npm install --silent --no-audit --no-fund --prefix $(HOSTS) \
		"@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)" "@openai/codex@$(CODEX_VERSION)"
	$(HOSTS)/node_modules/.bin/claude --version
	$(HOSTS)/node_modules/.bin/codex --version
	touch $@

hosts: $(HOSTS)/.hosts-$(CLAUDE_CODE_VERSION)-$(CODEX_VERSION)

# Debian packages the tests need, installed only when missing (as root, else through
# sudo), without recommended packages (Chromium's recommends are 90 more packages, avahi
# and samba libraries among them). Quiet when it works; when it fails apt-get's output
# (kept in target/apt-PACKAGE.log) is shown and the target fails. The package lists are
# refreshed only when the first attempt fails.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_GET := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get
define apt_install
mkdir -p target && echo "apt-get: installing $(1)" >&2 \
	&& { { $(APT_GET) install -y -q --no-install-recommends $(1) \
		|| { $(APT_GET) update -q && $(APT_GET) install -y -q --no-install-recommends $(1); }; \
	} >target/apt-$(firstword $(1)).log 2>&1 \
	|| { cat target/apt-$(firstword $(1)).log >&2; echo "apt-get install $(1) failed (output above)" >&2; exit 1; }; }
endef

# The zsh variants of tests/it/bash.rs need zsh.
shells:
	@command -v zsh >/dev/null 2>&1 || { $(call apt_install,zsh); }

# The HTML usage report is rendered by headless Chromium in tests/it/usage_report.rs and
# report_html.rs (they fail without it unless WINX_SKIP_BROWSER=1).
browser:
	@command -v chromium >/dev/null 2>&1 || { $(call apt_install,chromium); }

# tests/it/codemap_ctags.rs compares CodeMap's outlines with Universal Ctags'.
ctags:
	@ctags --version 2>/dev/null | grep -q Universal || { $(call apt_install,universal-ctags); }

# make for the steps, named indirectly so `make -n test` only prints the recipe.
SUBMAKE := $(MAKE)
# Each step and then every test binary run even when an earlier one fails (cargo test
# --no-fail-fast); the installs after `--` run in the background beside the lint and the
# test build; the last line is "N passed, N failed, N ignored", then the steps that
# failed, if any (tests/make_test.sh, decision 045).
test:
	@WINX_TEST_PYTHON=$(abspath $(PYTHON)) WINX_TEST_TS_SDK=$(abspath $(NODE_SDK)) \
		WINX_TEST_HOSTS=$(abspath $(HOSTS)) CARGO="$(CARGO)" MAKE="$(SUBMAKE)" \
		tests/make_test.sh lint -- venv node-sdk hosts shells browser ctags

bench: hosts
	$(CARGO) bench --bench stdio
	$(CARGO) bench --bench shell
	$(CARGO) bench --bench files
	$(CARGO) bench --bench history
	$(CARGO) bench --bench agent
	$(CARGO) bench --bench usage
	$(CARGO) bench --bench codemap
	$(CARGO) bench --bench requests
	$(CARGO) bench --bench http
	$(CARGO) test --release --test it http_hostile::bench_ -- --ignored --nocapture
	$(CARGO) test --release --test it http_sessions::bench_ -- --ignored --nocapture
	# The real Codex TUI in a winx PTY: prints "task_complete to watch: N ms", from Codex
	# writing a turn's task_complete to the final reaching `agent request watch`.
	WINX_TEST_HOSTS=$(abspath $(HOSTS)) $(CARGO) test --release --test it \
		agent_real_codex::the_real_codex_is_prompted_once -- --nocapture

# `make bench-peers` (not part of `make test`): the same workloads against winx (both
# runtimes), the original winx-code-agent release and wcgw, next to bash on a raw PTY;
# rewrites docs/benchmarks.md and docs/benchmarks.svg. The peers are installed once under
# target/peers/ (one directory per pinned version, so a second run installs nothing); a peer
# that fails to install is reported by the bench as "not installed".
PEERS := target/peers
WINX_PEER_VERSION := 0.2.358
WCGW_VERSION := 5.6.7
WINX_PEER := $(PEERS)/winx-$(WINX_PEER_VERSION)
WCGW_PEER := $(PEERS)/wcgw-$(WCGW_VERSION)

# --locked: the crate's own Cargo.lock, as released.
$(WINX_PEER)/.installed:
	$(CARGO) install winx-code-agent --version $(WINX_PEER_VERSION) --locked --root $(WINX_PEER)
	touch $@

$(WCGW_PEER)/.installed:
	python3 -m venv $(WCGW_PEER)
	$(WCGW_PEER)/bin/pip install --quiet --disable-pip-version-check "wcgw==$(WCGW_VERSION)"
	touch $@

peers: $(WINX_PEER)/.installed $(WCGW_PEER)/.installed

bench-peers:
	-$(MAKE) --no-print-directory -k peers
	WINX_BENCH_PEER_WINX=$(abspath $(WINX_PEER)/bin/winx-code-agent) \
		WINX_BENCH_PEER_WCGW=$(abspath $(WCGW_PEER)/bin/wcgw_mcp) \
		$(CARGO) bench --bench peers

clean:
	$(CARGO) clean
