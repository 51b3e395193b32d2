// Package sipusers manages SIP accounts: who may register with the node's
// registrar and with which password.
//
// Passwords are never stored. An account keeps, for its realm (the SIP
// domain), the HA1 digests of RFC 7616 section 3.4.2 for both algorithms a
// registrar offers (RFC 8760):
//
//	HA1 = H(username ":" realm ":" password)   H = MD5 and H = SHA-256
//
// Accounts live in the catalog (table sip_users). Service adds, lists and
// deletes them and serves lookups from a short-lived cache, so the SIP hot
// path does not query SQL for every REGISTER.
package sipusers
