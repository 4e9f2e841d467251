package auth

import "crypto/x509"

// IdentityOfCertificate returns the identity a certificate issued by the
// cluster CA names (user, groups, role, cluster), for a server that
// verified the certificate itself, such as the WebHDFS gateway's TLS
// listener.
func IdentityOfCertificate(cert *x509.Certificate) *Identity { return identityOf(cert) }
