#!/usr/bin/env node
// A remote Arena bot in Node.js.
//
// Loads the arena.v1 .proto files directly (no generated code), dials
// BotSessionService.Play, says Hello, challenges a hosted opponent and answers
// every Turn with a legal action. Usage:
//
//   node bot.js [--address localhost:50051] [--opponent random] [--game rps] [--matches 1]
//               [--name NAME --token TOKEN] [--proto-dir ../../proto]
//
// Exits 0 when every requested match has been played, 1 on a fatal error.
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function parseArgs(argv) {
  const options = {
    address: 'localhost:50051',
    opponent: 'random',
    game: 'rps',
    matches: 1,
    name: '',
    token: '',
    protoDir: path.join(__dirname, '..', '..', 'proto'),
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(key in options)) throw new Error(`unknown option ${argv[i]}`);
    options[key] = key === 'matches' ? Number(argv[i + 1]) : argv[i + 1];
  }
  return options;
}

function loadService(protoDir) {
  const definition = protoLoader.loadSync('arena/v1/bot_session.proto', {
    includeDirs: [protoDir],
    keepCase: false, // fields in lowerCamelCase, as in the JSON mapping
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true, // message.kind names the field that is set
  });
  return grpc.loadPackageDefinition(definition).arena.v1.BotSessionService;
}

// The strategy: in rock-paper-scissors, play what beats the opponent's last
// sign; otherwise a random legal action. Replace it with yours.
function choose(turn, seat) {
  const legal = turn.legalActions;
  const rps = turn.observation && turn.observation.rps;
  if (rps && rps.signs === 3 && rps.lastRound.length === 2) {
    const beat = (rps.lastRound[1 - seat] + 1) % 3;
    if (legal.includes(beat)) return beat;
  }
  return legal[Math.floor(Math.random() * legal.length)];
}

const MAX_REFUSALS = 6; // temporary refusals in a row before giving up (0.5 s doubling: about 30 s)

function main() {
  const options = parseArgs(process.argv.slice(2));
  const Service = loadService(options.protoDir);
  const client = new Service(options.address, grpc.credentials.createInsecure());
  const call = client.Play();
  let seat = 0;
  let played = 0;
  let failed = false;
  let refusals = 0; // temporary refusals in a row (the server stopping, or its database busy)

  const challenge = () => {
    call.write({
      challenge: { opponent: options.opponent, game: options.game, matches: options.matches - played },
    });
  };

  const finish = (code) => {
    call.end();
    client.close();
    process.exitCode = code;
  };

  call.on('data', (message) => {
    switch (message.kind) {
      case 'welcome':
        console.error(`welcome: playing as ${message.welcome.botName}`);
        challenge();
        break;
      case 'challengeStatus': {
        const status = message.challengeStatus;
        console.error(`challenge: ${status.state} ${status.reason}`);
        if (status.state === 'STATE_REFUSED' && status.retryLater && refusals < MAX_REFUSALS) {
          // Refused for now, not for what the challenge is: send it again after a pause.
          const delay = 500 * 2 ** refusals;
          refusals += 1;
          console.error(`challenging again in ${delay} ms`);
          setTimeout(challenge, delay);
        } else if (status.state === 'STATE_REFUSED') {
          failed = true;
          finish(1);
        } else if (status.state === 'STATE_STARTED') {
          refusals = 0;
        } else if (status.state === 'STATE_DONE') {
          finish(failed ? 1 : 0);
        }
        break;
      }
      case 'matchStarted':
        seat = message.matchStarted.seat;
        break;
      case 'turn': {
        const turn = message.turn;
        call.write({ action: { matchId: turn.matchId, turnId: turn.turnId, action: choose(turn, seat) } });
        break;
      }
      case 'matchEnded': {
        const ended = message.matchEnded;
        played += 1;
        console.error(`match ${ended.matchId} ended: ${ended.termination} ${ended.returns.join(' : ')} (${ended.reason})`);
        if (played >= options.matches) finish(failed ? 1 : 0);
        break;
      }
      case 'ping':
        call.write({ pong: { nonce: message.ping.nonce } });
        break;
      case 'error':
        console.error(`server error: ${message.error.code} ${message.error.message}`);
        if (message.error.fatal) {
          failed = true;
          finish(1);
        }
        break;
      default:
        break;
    }
  });
  call.on('error', (err) => {
    if (err.code !== grpc.status.CANCELLED) {
      console.error(`stream error: ${err.message}`);
      process.exitCode = 1;
    }
  });
  call.on('end', () => client.close());

  call.write({
    hello: {
      protocolVersion: 'arena.v1',
      name: options.name,
      token: options.token,
      games: [options.game],
      client: 'arena-javascript/0.1',
    },
  });
}

main();
