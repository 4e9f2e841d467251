package client

// NamenodeAddr returns the address of the namenode the client is
// connected to.
func (c *Client) NamenodeAddr() string {
	nn, _ := c.conn()
	return nn.Addr()
}
