/*-------------------------------------------------------------------------
 *
 * worker.h
 *		The background workers: a launcher that starts one sweeper per
 *		database where durable is installed.
 *
 * IDENTIFICATION
 *	  src/worker.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_WORKER_H
#define DURABLE_WORKER_H

/* Register the launcher (from _PG_init, when preloading). */
extern void durable_worker_register_launcher(void);

/* Install the utility hook that stops a database's worker before DROP DATABASE. */
extern void durable_worker_install_hooks(void);

/* The worker's settings of ALTER DATABASE/ROLE ... SET (db_settings.c). */
extern void durable_db_settings_remember(void);
extern bool durable_db_settings_changed(void);

#endif							/* DURABLE_WORKER_H */
