/*-------------------------------------------------------------------------
 *
 * init_privs.h
 *		The initial privileges of durable's objects across REASSIGN OWNED.
 *
 * IDENTIFICATION
 *	  src/init_privs.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_INIT_PRIVS_H
#define DURABLE_INIT_PRIVS_H

#include "nodes/parsenodes.h"

/*
 * After `stmt` ran: the initial privileges of durable's objects that name
 * one of its old roles name its new role instead (PostgreSQL 17 does this
 * itself; before it, nothing).
 */
extern void durable_init_privs_reassigned(const ReassignOwnedStmt *stmt);

#endif							/* DURABLE_INIT_PRIVS_H */
