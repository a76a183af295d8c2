// OnceGate for Logic Apps (Consumption), stage two: the connection to this app and the sample workflow,
// deployed after the code is published by azure.yaml's postdeploy hook (tools/logicapps_connection.py,
// docs/deploy.md, "Logic Apps in one step"); stage one, app/logicapps.bicep, deployed the connector.
//
// Function keys: the connection signs in with a function key of its own, functionKeyName, which the hook
// creates on the running host when it is missing. listKeys reads it when the connection deploys: the key
// is never a parameter or an output, and revoking it (az functionapp keys delete) shuts out this
// connection alone, where the shared default key opens every route to every caller that holds it. In
// entra mode there is no key to give: the connection is signed in once by a person, in the portal.

@description('Name of the OnceGate function app the connection calls.')
param functionAppName string

@description('Name of the custom connector stage one deployed (main.bicep\'s output LOGIC_APPS_CONNECTOR_NAME); the connection has the same name.')
param connectorName string

@allowed([
  'key'
  'entra'
])
@description('ONCEGATE_AUTH of the function app: key (the connection holds a function key) or entra (a person signs it in).')
param authMode string

@description('The azd environment name: the sample workflow\'s flow environment, sent with every claim, and the azd-env-name tag.')
param environmentName string

@minLength(1)
@description('Name of the function key the connection signs in with: a host key of its own, revocable alone.')
param functionKeyName string = 'oncegate-logicapps'

@minLength(1)
@description('The target the Perform once sample creates its orders at: declared by an operator with oncegate targets set (docs/deploy.md, "The Perform once sample and its target"); until then its runs answer that the target is not declared.')
param orderTarget string = 'erp-orders'

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource connector 'Microsoft.Web/customApis@2016-06-01' existing = {
  name: connectorName
}

var location = connector.location
var tags = {
  'azd-env-name': environmentName
}
var resourceToken = substring(connectorName, length('oncegate-'))

resource connection 'Microsoft.Web/connections@2016-06-01' = {
  name: connectorName
  location: location
  tags: tags
  properties: {
    displayName: 'OnceGate at ${functionApp.properties.defaultHostName}'
    api: {
      id: connector.id
    }
    // Only the chosen branch is evaluated (ARM's if()): in entra mode no key is read.
    parameterValues: authMode == 'entra' ? {} : {
      api_key: listKeys('${functionApp.id}/host/default', '2024-04-01').functionKeys[functionKeyName]
    }
  }
}

// The workflows' own parameters: what each definition declares, and nothing else.
var connectionsParameter = {
  value: {
    oncegate: {
      connectionId: connection.id
      connectionName: connection.name
      id: connector.id
    }
  }
}
var environmentParameter = {
  value: environmentName
}
var workflowParameters = {
  '$connections': connectionsParameter
  environmentName: environmentParameter
}

resource workflow 'Microsoft.Logic/workflows@2019-05-01' = {
  name: 'logic-oncegate-sample-${resourceToken}'
  location: location
  tags: tags
  properties: {
    state: 'Enabled'
    definition: loadJsonContent('../../connector/samples/workflow.json', '$.definition')
    parameters: workflowParameters
  }
}

// The bulk import (issue 24): a page of rows -> Select -> Check and claim many -> Filter proceed -> For each
// (the side effect) -> Select -> Record results; two connector calls per 100 rows.
resource bulkWorkflow 'Microsoft.Logic/workflows@2019-05-01' = {
  name: 'logic-oncegate-bulk-${resourceToken}'
  location: location
  tags: tags
  properties: {
    state: 'Enabled'
    definition: loadJsonContent('../../connector/samples/bulk-workflow.json', '$.definition')
    parameters: workflowParameters
  }
}

// Perform once (issue 34): an order created at a declared target, once however often the action runs.
resource performWorkflow 'Microsoft.Logic/workflows@2019-05-01' = {
  name: 'logic-oncegate-perform-${resourceToken}'
  location: location
  tags: tags
  properties: {
    state: 'Enabled'
    definition: loadJsonContent('../../connector/samples/perform-workflow.json', '$.definition')
    parameters: {
      '$connections': connectionsParameter
      environmentName: environmentParameter
      orderTarget: {
        value: orderTarget
      }
    }
  }
}

@description('Name of the sample workflow: its trigger\'s URL is read with listCallbackUrl (docs/deploy.md), never output here.')
output workflowName string = workflow.name

@description('Name of the connection (Microsoft.Web/connections).')
output connectionName string = connection.name
