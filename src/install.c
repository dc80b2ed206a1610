/*-------------------------------------------------------------------------
 *
 * install.c
 *		What durable's install and update scripts ask of the server that SQL
 *		cannot answer.
 *
 * The scripts create a function over one of these, call it and drop it
 * again, so none is part of the installed extension; each stays in the
 * library for as long as a script that ships with it uses it.
 *
 * IDENTIFICATION
 *	  src/install.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "utils/acl.h"

PG_FUNCTION_INFO_V1(durable_xid_is_current);
PG_FUNCTION_INFO_V1(durable_acl_new_owner);

/*
 * Whether `xid` is this transaction's or one of its subtransactions':
 * durable--0.6--0.7.sql's test for an install made by this very
 * transaction.  age(xid) cannot tell: a subtransaction's xid is newer than
 * the top transaction's (a negative age), and so, modulo 2^32, is the xid
 * of a row written more than 2^31 transactions ago.
 */
Datum
durable_xid_is_current(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(TransactionIdIsCurrentTransactionId(PG_GETARG_TRANSACTIONID(0)));
}

/*
 * `acl` as ALTER ... OWNER TO from `old_owner` to `new_owner` changes an
 * ACL (aclnewowner: the role replaced as grantee and grantor, its entries
 * merged): durable--0.12--0.13.sql moves the initial privileges of a
 * durable given to another owner before 0.13 (init_privs.c does it after
 * each REASSIGN OWNED since).  SQL's makeaclitem takes one privilege per
 * item before PostgreSQL 16.
 */
Datum
durable_acl_new_owner(PG_FUNCTION_ARGS)
{
	PG_RETURN_ACL_P(aclnewowner(PG_GETARG_ACL_P(0), PG_GETARG_OID(1), PG_GETARG_OID(2)));
}
