/* config_cmd.h - `hsmca config check FILE`: what serve would refuse about a config,
 * without a token, a PIN or a port. */
#ifndef HSMCA_CONFIG_CMD_H
#define HSMCA_CONFIG_CMD_H

/* argv[0] is "config". 0: no problem (warnings allowed), 1: problems, each on a line
 * naming the file, the line and the key; 2: usage. */
int config_main(int argc, char **argv);

#endif
