# durable: PGXS build.
#
# The test suites run against a throwaway cluster started by scripts/test
# (which is what `make test` and .ci/run call).  `make installcheck` also
# works against any running server that preloads durable (see
# test/durable.conf for the settings the tests expect).

MODULE_big = durable
OBJS = \
	$(WIN32RES) \
	src/durable.o \
	src/args.o \
	src/spi_util.o \
	src/shmem.o \
	src/metrics.o \
	src/inbox.o \
	src/claim_floor.o \
	src/chat_lock.o \
	src/load_hold.o \
	src/direct.o \
	src/outbox.o \
	src/token.o \
	src/instance.o \
	src/isolate.o \
	src/references.o \
	src/planner.o \
	src/recovery.o \
	src/sweep.o \
	src/worker.o \
	src/db_settings.o \
	src/sessions.o \
	src/permit.o \
	src/waiting.o \
	src/ddl_guard.o \
	src/init_privs.o \
	src/install.o

EXTENSION = durable
DATA = durable--0.1.sql durable--0.1--0.2.sql durable--0.2--0.3.sql durable--0.3--0.4.sql \
	durable--0.4--0.5.sql durable--0.5--0.6.sql durable--0.6--0.7.sql \
	durable--0.7--0.8.sql durable--0.8--0.9.sql durable--0.9--0.10.sql \
	durable--0.10--0.11.sql durable--0.11--0.12.sql durable--0.12--0.13.sql \
	durable--0.13--0.14.sql
PGFILEDESC = "durable - journaled inbox and outbox for chat bots"

# One file per feature; each reads as documentation of that feature.
REGRESS = inbox inbox_errors outbox outbox_errors instance sweep sessions permit metrics privileges security bad_input names settings plans
REGRESS_OPTS = --inputdir=. --load-extension=durable
ISOLATION = claim_disjoint chat_order_rr outbox_claim_disjoint stale_complete chat_order heartbeat_takeover outbox_same_key outbox_stale_sent enqueue_twice claim_vs_sweep purge_vs_replay notify permit_contention outbox_chat_wake confirm_waits admit_twice unchanged_key claim_replaced chat_lock_private rr_fresh_lease rr_fresh_record lease_after_wait purge_resume purge_locked_reference purge_key_race claim_wakes instance_start_locked complete_retry reindex_calls reindex_other_journal lock_guard outbox_enqueue_order derived_key_race heartbeat_shortens admit_other_chat no_notify_per_message session_owner sweep_window outbox_late_confirmations permit_per_change sweep_open_writer claim_key_share oversized_lock_order purge_guard_renamed purge_guard_swapped restore_pinned
ISOLATION_OPTS = --inputdir=test --load-extension=durable
# The suites need shared_preload_libraries=durable, so there is no temp
# instance (`make check`); `make installcheck` runs them against the
# server of PGHOST/PGPORT.  (pgxs.mk tests NO_INSTALLCHECK with ifndef:
# setting it to anything, 0 included, removes the target.)

PG_CPPFLAGS = -I$(srcdir)/src -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare
# The library checks that the database's tables are its version's (pgxs.mk
# expands PG_CPPFLAGS when it is included: the version is read here).
DURABLE_VERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(dir $(firstword $(MAKEFILE_LIST)))durable.control)
PG_CPPFLAGS += -DDURABLE_VERSION='"$(DURABLE_VERSION)"'
ifdef WERROR
PG_CPPFLAGS += -Werror
endif
# `make coverage` (scripts/test with COVERAGE=1) builds the library for gcov.
ifdef COVERAGE
PG_CFLAGS += --coverage -O0
SHLIB_LINK += --coverage
endif
EXTRA_CLEAN += src/*.gcno src/*.gcda

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The version is compiled in (-DDURABLE_VERSION): a new default_version must
# rebuild every object, not only those known to use it today (until 0.12 only
# spi_util.o was, and the worker went on naming the old version in its log).
$(filter src/%.o,$(OBJS)): durable.control
# The headers are few and shared: a change to one rebuilds every object (a
# stale object with an old shared-memory layout corrupts the new one's).
$(filter src/%.o,$(OBJS)): $(wildcard $(srcdir)/src/*.h)

# Print a make variable (used by scripts/test to find the suites).
print-%:
	@echo $($*)

# Client-side programs (libpq): the crash-test bot simulator, durablectl, the C example bot.
TOOLS = test/crash/botsim cli/durablectl examples/c/bot
EXTRA_CLEAN += $(TOOLS)
.PHONY: tools
tools: $(TOOLS)
test/crash/botsim: test/crash/botsim.c
	$(CC) -O2 -Wall -Wextra $(if $(WERROR),-Werror) -o $@ $< \
		-I$(shell $(PG_CONFIG) --includedir) -L$(shell $(PG_CONFIG) --libdir) -lpq

# durablectl, the operator's command-line tool (libpq): built by `make`,
# installed by `make install` beside psql in $(bindir).  examples/c/bot is
# the example bot in C (built by `make tools`, not installed).
all: cli/durablectl
cli/durablectl: cli/durablectl.c cli/text.c cli/text.h durable.control
	$(CC) -O2 -Wall -Wextra $(if $(WERROR),-Werror) -DDURABLECTL_VERSION='"$(DURABLE_VERSION)"' \
		-o $@ $(filter %.c,$^) -I$(shell $(PG_CONFIG) --includedir) -L$(shell $(PG_CONFIG) --libdir) -lpq
examples/c/bot: examples/c/bot.c
	$(CC) -O2 -Wall -Wextra $(if $(WERROR),-Werror) -o $@ $< \
		-I$(shell $(PG_CONFIG) --includedir) -L$(shell $(PG_CONFIG) --libdir) -lpq
.PHONY: install-durablectl uninstall-durablectl
install: install-durablectl
install-durablectl: cli/durablectl
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) cli/durablectl '$(DESTDIR)$(bindir)/durablectl'
uninstall: uninstall-durablectl
uninstall-durablectl:
	rm -f '$(DESTDIR)$(bindir)/durablectl'

# A source tarball of HEAD (commit first) for PGXN, named for META.json's version.
DIST_VERSION := $(shell sed -n 's/^   "version": "\(.*\)",$$/\1/p' $(srcdir)/META.json)
.PHONY: dist
dist:
	@case '$(DIST_VERSION)' in '$(DURABLE_VERSION)'.*) ;; \
	*) echo "META.json version $(DIST_VERSION) does not match durable.control $(DURABLE_VERSION)" >&2; exit 1;; esac
	git archive --format=tar.gz --prefix=durable-$(DIST_VERSION)/ -o durable-$(DIST_VERSION).tar.gz HEAD

# Crash test with the bot simulator (the extension must be installed):
# crashtest is the short run of the test suite, soak the 10-minute one.
.PHONY: crashtest soak
crashtest: tools
	bash test/crash/run short
soak: tools
	bash test/crash/run soak

# Static checks of src/ (run by scripts/test).
PG_INCLUDEDIR_SERVER := $(shell $(PG_CONFIG) --includedir-server)
.PHONY: lint
# Static checks of the extension and of the client programs (botsim only by
# cppcheck: clang-tidy 14 misreads its va_start).
CPPCHECK = cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	--inline-suppr --suppress=missingIncludeSystem --suppress=unknownMacro
CLANG_TIDY = clang-tidy --quiet --warnings-as-errors='*' \
	--checks='-*,clang-analyzer-*,bugprone-*,-bugprone-reserved-identifier,-bugprone-easily-swappable-parameters,-bugprone-narrowing-conversions,-bugprone-sizeof-expression,-bugprone-branch-clone,-bugprone-implicit-widening-of-multiplication-result,-clang-analyzer-security.insecureAPI.*,-clang-analyzer-deadcode.DeadStores'
CLIENT_SOURCES = cli/durablectl.c cli/text.c examples/c/bot.c
PYTHON_SOURCES = examples/python/bot.py test/model/model.py test/memcheck/errors.py

lint:
	$(CPPCHECK) -I src -I $(PG_INCLUDEDIR_SERVER) -D__GNUC__ -DDURABLE_VERSION='"$(DURABLE_VERSION)"' src/*.c
	$(CPPCHECK) -I $(shell $(PG_CONFIG) --includedir) $(CLIENT_SOURCES) test/crash/botsim.c
	$(CLANG_TIDY) src/*.c -- -I src -I $(PG_INCLUDEDIR_SERVER) -I$(shell $(PG_CONFIG) --includedir) \
		-DDURABLE_VERSION='"$(DURABLE_VERSION)"'
	$(CLANG_TIDY) $(CLIENT_SOURCES) -- -I$(shell $(PG_CONFIG) --includedir)
	/usr/bin/python3 -m pyflakes $(PYTHON_SOURCES)

.PHONY: test coverage demo bench bench-instructions
test:
	bash scripts/test
# SUITES="regress iso" limits the run to some suites (names as scripts/test takes them).
coverage:
	COVERAGE=1 bash scripts/test $(SUITES)
demo:
	bash scripts/demo
bench:
	bash bench/run
bench-instructions:
	bash bench/instructions
