package client

// Config returns the client's effective configuration: the one it was
// made with, with the defaults filled in and the user and group its
// credential names.
func (c *Client) Config() Config { return c.cfg }

// NamenodeAddr returns the address of the namenode the client is
// connected to.
func (c *Client) NamenodeAddr() string {
	nn, _ := c.conn()
	return nn.Addr()
}
